"""Entry files written by Spark's own Parquet writer (docs/spark.md, "Writes").

The system columns are computed in the JVM: ``trx_id`` and ``dml_type`` as they come,
``trx_seq`` (and generated ``_row_id``s) as the Spark partition's first number, claimed by the
driver from the counting pass, plus the row's position in its partition. Each Spark partition
is sorted by table partition and the table's sort order and written by Spark into a staging
folder inside the table's data folder. The driver then reads each file's key columns for its
marker (the same statistics the shared writer keeps) and moves it to its name and partition
folder (docs/format.md section 7). Until the commit names them, the files are orphans: a crash
leaves nothing visible, and vacuum deletes them.
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
import uuid
from collections.abc import Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
from pyspark.sql import Column, DataFrame, DataFrameWriter, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ledger.engines.spark.convert import col, spark_schema
from ledger.engines.spark.errors import task_errors
from ledger.engines.spark.scan import native_paths
from ledger.errors import InvalidArgumentError
from ledger.log.entries import FileMarker, TableConfig, json_value
from ledger.partitioning import PartitionField, PartitionSpec
from ledger.schema import DML_TYPE, ROW_ID, TRX_ID, TRX_SEQ, TableSchema
from ledger.storage import Store
from ledger.storage.local import fsync_path
from ledger.writer import FILE_ROWS, ROW_GROUP_ROWS, file_schema, sort_columns

log = logging.getLogger(__name__)

STAGING_PREFIX = "_spark-"  # staging folders: <data folder>/_spark-<hex>/
_GROUP = "__ledger_partition"  # the table partition a row's file belongs to, in Spark
_SPARK_PARTITION = "__ledger_spark_partition"
_POSITION = "__ledger_position"
_POSITION_BITS = (1 << 33) - 1  # monotonically_increasing_id(): partition << 33 | position
_MARKER_THREADS = 8
# Session settings Spark's Parquet writer takes only from the session (not from write options):
# DECIMAL as FIXED_LEN_BYTE_ARRAY whatever its precision, and TIMESTAMPTZ as INT64 microseconds
# (Spark's default is the deprecated INT96), as docs/format.md section 7 requires.
_SESSION_SETTINGS = {
    "spark.sql.parquet.writeLegacyFormat": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}
_settings_lock = threading.Lock()


@dataclass(frozen=True)
class Numbering:
    """Per Spark partition: its rows (``expected``), their kind, where its ``trx_seq`` numbers
    start and, for partitions whose rows all need one, where its generated row ids start."""

    expected: dict[int, int]
    kind: dict[int, int]
    first_seq: dict[int, int]
    first_row: dict[int, int]


def numbering(
    rows: Mapping[tuple[int, int], int],
    new_row_ids: Mapping[int, int],
    first_seq: Mapping[tuple[int, int], int],
    first_row: Mapping[int, int],
) -> Numbering | None:
    """The numbering Spark can compute from a row's position in its partition, or None when a
    Spark partition mixes marks and insertions, or rows with and without a ``_row_id`` (then
    positions would have to be counted per kind)."""
    expected: dict[int, int] = {}
    kind: dict[int, int] = {}
    for (partition, row_kind), count in rows.items():
        if partition in kind:
            return None
        expected[partition], kind[partition] = count, row_kind
    if any(n not in (0, expected.get(p, 0)) for p, n in new_row_ids.items()):
        return None
    return Numbering(
        expected=expected,
        kind=kind,
        first_seq={p: first_seq[(p, k)] for p, k in kind.items()},
        first_row={p: first_row[p] for p, n in new_row_ids.items() if n},
    )


def can_write(spark: object, store: Store, config: TableConfig, schema: TableSchema) -> bool:
    """Whether Spark's writer can write this table's files here: Spark reaches the store (local
    disk, or S3 through the S3A connector), and every partition field's grouping can be
    computed in the JVM (not ``bucket``: its hash is of the value's canonical text)."""
    spec = PartitionSpec.parse(list(config.partition_by), schema)
    if any(f.transform == "bucket" for f in spec.fields):
        return False
    return native_paths(spark, store, [config.data_folder]) is not None  # type: ignore[arg-type]


def write_files(
    entries: DataFrame,
    *,
    store: Store,
    table_prefix: str,
    schema: TableSchema,
    config: TableConfig,
    trx_id: int,
    numbers: Numbering,
    other_rows: str,
) -> list[FileMarker]:
    """Write ``entries`` (user columns, maybe ``_row_id``, ``dml_type`` and :data:`KIND`) as
    entry files numbered by ``numbers``; return their markers. Raises
    :class:`InvalidArgumentError` with ``other_rows`` in its message when a Spark partition
    held other rows than were counted (nothing of the write is left but orphans)."""
    spark = entries.sparkSession
    spec = PartitionSpec.parse(list(config.partition_by), schema)
    target = file_schema(schema, config)
    staging = f"{table_prefix}{config.data_folder}/{STAGING_PREFIX}{uuid.uuid4().hex}"
    [spark_path] = native_paths(spark, store, [staging]) or [""]
    numbered = _numbered(entries, target, trx_id, numbers, config)
    grouped = numbered if not spec.fields else numbered.withColumn(_GROUP, _group(spec, numbered))
    # trx_id is the same in every row of a write: no sort key.
    order = [*([_GROUP] if spec.fields else []), *(c for c in sort_columns(config) if c != TRX_ID)]
    ready = grouped.sortWithinPartitions(*(col(c).asc_nulls_last() for c in order)).select(
        *map(col, [*target.names, *([_GROUP] if spec.fields else [])])
    )
    writer = (
        ready.write.option("compression", "snappy")
        .option("maxRecordsPerFile", FILE_ROWS)
        .option("parquet.block.row.count.limit", ROW_GROUP_ROWS)
    )
    for field in target:  # Parquet leaves NaN out of float bounds: see statistics_columns
        if pa.types.is_floating(field.type):
            writer = writer.option(f"parquet.column.statistics.enabled#{field.name}", "false")
    if spec.fields:
        writer = writer.partitionBy(_GROUP)
    moved: list[str] = []
    try:
        run_spark_write(spark, writer, spark_path)
        markers = place_files(
            store, table_prefix, staging, config, spec, moved, numbers, other_rows
        )
    except BaseException:
        for key in moved:
            with contextlib.suppress(Exception):
                store.delete(key)
        raise
    finally:
        _remove_folder(store, staging)
    return markers


def run_spark_write(spark: SparkSession, writer: DataFrameWriter, spark_path: str) -> None:
    """The Spark job: compute the entries and write them with Spark's Parquet writer."""
    with _session_settings(spark), task_errors("writing entry files"):
        writer.mode("errorifexists").parquet(spark_path)


def _numbered(
    entries: DataFrame, target: pa.Schema, trx_id: int, numbers: Numbering, config: TableConfig
) -> DataFrame:
    """``entries`` as the file schema's columns, each nullable (Parquet columns are all
    optional), numbered from each row's Spark partition and position in it."""
    # Both from one projection, before any sort: the position is the row's place in its
    # Spark partition as the counting pass saw it.
    placed = entries.select(
        "*",
        F.spark_partition_id().alias(_SPARK_PARTITION),
        F.monotonically_increasing_id().bitwiseAND(F.lit(_POSITION_BITS)).alias(_POSITION),
    )
    partition, position = col(_SPARK_PARTITION), col(_POSITION)
    types = spark_schema(target)
    columns: list[Column] = []
    for field in types.fields:
        name, kind = field.name, field.dataType
        if name == TRX_ID:
            value = F.lit(trx_id)
        elif name == TRX_SEQ:
            value = _lookup(numbers.first_seq, partition) + position
        elif name == DML_TYPE:
            value = col(DML_TYPE)
        elif name == ROW_ID:
            generated = _lookup(numbers.first_row, partition) + position + F.lit(trx_id << 32)
            given = col(ROW_ID) if ROW_ID in entries.columns else F.lit(None)
            value = F.coalesce(given.cast("bigint"), generated)
        elif name in entries.columns:
            value = col(name)
        else:
            value = F.lit(None)
        value = value.cast(kind)
        if name == TRX_ID or (name in entries.columns and not entries.schema[name].nullable):
            # A nondeterministic condition keeps Spark from proving the column non-NULL (it
            # would then write a required Parquet column).
            value = F.when(partition >= 0, value)
        columns.append(value.alias(name))
    return placed.select(*columns)


def _lookup(values: Mapping[int, int], partition: Column) -> Column:
    """``values[partition]`` in the JVM (NULL for a partition not in ``values``): an index into
    a constant array, one step per row."""
    if not values:
        return F.lit(None).cast("bigint")
    items = [F.lit(values.get(p)).cast("bigint") for p in range(max(values) + 1)]
    return F.try_element_at(F.array(*items), partition + F.lit(1))


def _check_numbers(
    sequences: Sequence[pa.ChunkedArray], numbers: Numbering, other_rows: str
) -> None:
    """Every ``trx_seq`` the counting pass gave out is in the files exactly once. Numbers are
    positions in Spark partitions, so this holds only if every Spark partition of the write
    held as many rows as counted."""
    low = min(numbers.first_seq.values())
    high = max(numbers.first_seq[p] + n for p, n in numbers.expected.items())
    wanted = np.zeros(high - low, dtype=np.int64)
    for p, n in numbers.expected.items():
        wanted[numbers.first_seq[p] - low : numbers.first_seq[p] - low + n] = 1
    found = np.zeros(high - low + 1, dtype=np.int64)
    for seq in sequences:
        values = seq.to_numpy().astype(np.int64) - low
        # Out of range values all land in the last slot, which must stay empty.
        values[(values < 0) | (values >= high - low)] = high - low
        found += np.bincount(values, minlength=high - low + 1)
    if found[-1] or not np.array_equal(found[:-1], wanted):
        raise InvalidArgumentError(
            f"{other_rows} than when its rows were counted (it is not deterministic, or "
            "Spark planned its partitions otherwise); cache or checkpoint it before writing it "
            "to a ledger table"
        )


def _group(spec: PartitionSpec, numbered: DataFrame) -> Column:
    """A text that differs between rows of different table partitions (and is never empty or
    NULL, which Spark would write to one default folder): Spark writes one file per value and
    Spark partition. The exact partition values come from each file's rows afterwards."""
    types = {f.name: f.dataType for f in numbered.schema.fields}
    parts = [
        F.coalesce(
            F.concat(F.lit("v"), _field_group(f, types[f.source]).cast("string")), F.lit("n")
        )
        for f in spec.fields
    ]
    return F.concat_ws("/", *parts)


def _field_group(field: PartitionField, source: T.DataType) -> Column:
    value = col(field.source)
    if field.transform == "identity":
        if isinstance(source, T.BinaryType):
            return F.hex(value)
        if isinstance(source, T.TimestampType):  # an instant: its text would depend on the zone
            return F.unix_micros(value)
        return value
    wall = _utc_wall_time(value, source)
    year, month = F.year(wall), F.month(wall)
    if field.transform == "year":
        return year
    if field.transform == "month":
        return year * 100 + month
    day = (year * 100 + month) * 100 + F.dayofmonth(wall)
    if field.transform == "day":
        return day
    return day * 100 + F.hour(wall)  # hour


def _utc_wall_time(value: Column, source: T.DataType) -> Column:
    """A DATE or TIMESTAMP as it is, a TIMESTAMP with time zone as its UTC wall time (the
    partition of an instant is taken in UTC, whatever the session's time zone)."""
    if isinstance(source, T.TimestampType):
        epoch = F.lit("1970-01-01 00:00:00").cast(T.TimestampNTZType())
        return F.timestamp_add("MICROSECOND", F.unix_micros(value), epoch)
    return value


@contextlib.contextmanager
def _session_settings(spark: SparkSession) -> Iterator[None]:
    conf = spark.conf
    with _settings_lock:
        saved: dict[str, str | None] = {k: conf.get(k, None) for k in _SESSION_SETTINGS}
        for k, v in _SESSION_SETTINGS.items():
            conf.set(k, v)
        try:
            yield
        finally:
            for k, before in saved.items():
                if before is None:
                    conf.unset(k)
                else:
                    conf.set(k, before)


def place_files(
    store: Store,
    table_prefix: str,
    staging: str,
    config: TableConfig,
    spec: PartitionSpec,
    moved: list[str],
    numbers: Numbering,
    other_rows: str,
) -> list[FileMarker]:
    """Each Parquet file Spark wrote under ``staging``: its marker, read from its rows, and the
    file moved to ``<data folder>/<partition path>/<uuid>.parquet``. Keys moved so far are
    appended to ``moved`` (deleted by the caller if a later one fails). Raises
    :class:`InvalidArgumentError` with ``other_rows`` if the files do not hold the rows the
    counting pass numbered."""
    written = [
        info.key
        for info in store.list(staging + "/")
        if info.key.endswith(".parquet") and "/_temporary/" not in info.key
    ]
    local = store.local_path(table_prefix) is not None
    lock = threading.Lock()

    def place(key: str) -> tuple[FileMarker, pa.ChunkedArray] | None:
        found = _marker(store, key, config, spec, other_rows)
        if found is None:  # Spark writes an empty file to keep the schema of an empty task
            return None
        destination = table_prefix + found[0].path
        _move(store, key, destination)
        with lock:
            moved.append(destination)
        return found

    with ThreadPoolExecutor(max_workers=min(_MARKER_THREADS, max(1, len(written)))) as pool:
        placed = [m for m in pool.map(place, written) if m is not None]
    _check_numbers([seq for _, seq in placed], numbers, other_rows)
    markers = [marker for marker, _ in placed]
    if local:
        folders = {os.path.dirname(store.local_path(table_prefix + m.path) or "") for m in markers}
        for folder in sorted(folders):
            fsync_path(folder)
    return markers


def _marker(
    store: Store, key: str, config: TableConfig, spec: PartitionSpec, other_rows: str
) -> tuple[FileMarker, pa.ChunkedArray] | None:
    """The marker of one written file, its statistics taken from its rows as the shared writer
    takes them, its path where the file is to be moved; and its ``trx_seq`` numbers. None for
    a file without rows."""
    keys = list(config.key_columns)
    columns = sorted({*keys, DML_TYPE, TRX_ID, TRX_SEQ, *spec.sources})
    path = store.fs_path(key)
    rows = pq.read_table(path, columns=columns, filesystem=store.filesystem)
    if not rows.num_rows:
        return None
    if any(rows.column(k).null_count for k in keys):  # the counting pass found none
        raise InvalidArgumentError(f"{other_rows} than when its rows were counted (NULL keys)")
    partition: dict[str, str | None] = {}
    for field in spec.fields:
        values = pc.unique(field.values(rows))
        if len(values) != 1:
            raise AssertionError(f"{key} holds rows of {len(values)} partitions")
        partition[field.name] = values[0].as_py()
    folder = spec.path(partition)
    relative = f"{config.data_folder}/{folder + '/' if folder else ''}{uuid.uuid4().hex}.parquet"
    trx = pc.min_max(rows.column(TRX_ID))
    bounds = [pc.min_max(rows.column(k)) for k in keys]
    marker = FileMarker(
        path=relative,
        size=store.size(key),
        created_ms=int(time.time() * 1000),
        rows=rows.num_rows,
        dml_sum=int(pc.sum(rows.column(DML_TYPE)).as_py() or 0),
        trx_min=int(trx["min"].as_py()),
        trx_max=int(trx["max"].as_py()),
        partition=partition,
        key_min=tuple(json_value(b["min"].as_py()) for b in bounds),
        key_max=tuple(json_value(b["max"].as_py()) for b in bounds),
        unique_keys=_keys_lead(config) and _no_repeated_key(rows, keys),
    )
    return marker, rows.column(TRX_SEQ)


def _keys_lead(config: TableConfig) -> bool:
    """Whether files are sorted by key first (so equal keys are adjacent)."""
    keys = list(config.key_columns)
    return sort_columns(config)[: len(keys)] == keys


def _no_repeated_key(rows: pa.Table, keys: Sequence[str]) -> bool:
    if rows.num_rows < 2:
        return True
    same: pa.ChunkedArray | None = None
    for name in keys:
        values = rows.column(name)
        equal = pc.fill_null(pc.equal(values[1:], values[:-1]), False)
        same = equal if same is None else pc.and_(same, equal)
    return same is None or not pc.any(same).as_py()


def _move(store: Store, source: str, destination: str) -> None:
    """Move a file within the store: a rename on local disk (made durable before the commit
    points at it), a copy and delete on an object store."""
    local_source, local_destination = store.local_path(source), store.local_path(destination)
    if local_source is not None and local_destination is not None:
        os.makedirs(os.path.dirname(local_destination), exist_ok=True)
        os.rename(local_source, local_destination)
        fsync_path(local_destination)
        return
    store.filesystem.move(store.fs_path(source), store.fs_path(destination))


def _remove_folder(store: Store, staging: str) -> None:
    """Delete the staging folder and what Spark left in it (its success flag, checksums,
    files of a failed write); best effort: vacuum deletes leftover data files anyway."""
    try:
        store.filesystem.delete_dir(store.fs_path(staging))
    except FileNotFoundError:
        pass
    except (OSError, pa.ArrowException) as e:
        log.warning("could not delete the staging folder %s: %s", staging, e)
