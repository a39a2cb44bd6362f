"""Data files -> a DataFrame of raw entries, from the log's file list with the log's schema.

Files Spark's own filesystem can read (local disk, or S3 where the Hadoop S3 connector is on the
classpath) are read by Spark's Parquet reader; others are read with pyarrow inside
``mapInArrow``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
from pyspark.sql import DataFrame, SparkSession

from ledger.engines.spark import jars, s3a
from ledger.engines.spark.convert import col, spark_schema
from ledger.errors import InvalidArgumentError, StorageError
from ledger.log.entries import FileMarker
from ledger.schema import DML_TYPE
from ledger.storage import Store
from ledger.storage.s3 import S3Store

_SAFE_PATH = re.compile(r"[A-Za-z0-9_./=+-]+")


def scan_files(
    spark: SparkSession,
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    *,
    reader: str = "auto",
) -> DataFrame:
    """The raw entries of ``files`` as a DataFrame with exactly ``schema`` (columns missing from
    older files read as NULL). ``reader``: ``auto``, ``spark`` (Spark's Parquet reader), ``s3a``
    (Spark's Parquet reader through Hadoop's S3A connector: an S3 store only) or ``pyarrow``
    (executors read the files through the store's pyarrow filesystem)."""
    if reader == "s3a" and not isinstance(store, S3Store):
        raise InvalidArgumentError(
            f"reader='s3a' reads S3 stores only, and {store.uri!r} is not one; use 'auto'"
        )
    struct = spark_schema(schema)
    if not files:
        return spark.createDataFrame([], struct)
    keys = [table_prefix + f.path for f in files]
    paths = None if reader == "pyarrow" else native_paths(spark, store, keys)
    if paths is None:
        if reader in ("spark", "s3a"):
            raise StorageError(_no_native_reader(spark, store))
        return _pyarrow_scan(spark, store, keys, schema)
    # Partition values live in the log, never in paths Spark would parse (basePath = the file).
    frame = spark.read.schema(struct).option("mergeSchema", "false").parquet(*paths)
    return frame.select(*(col(f.name).cast(struct[f.name].dataType) for f in schema))


def native_paths(spark: SparkSession, store: Store, keys: Sequence[str]) -> list[str] | None:
    """Paths Spark's own filesystem reads ``keys`` at, or None when it cannot (a scheme without
    a Hadoop connector, or names Hadoop would misparse)."""
    local = [store.local_path(k) for k in keys]
    if all(p is not None for p in local):
        paths = [f"file://{p}" for p in local if p is not None]
    elif s3a.configure(spark, store):
        paths = [f"s3a://{store.fs_path(k)}" for k in keys]
    else:
        return None
    if not all(_SAFE_PATH.fullmatch(p.split("://", 1)[1]) for p in paths):
        return None
    return paths


def _no_native_reader(spark: SparkSession, store: Store) -> str:
    if isinstance(store, S3Store) and not s3a.connector_present(spark):
        return (
            f"Spark cannot read {store.uri!r} through S3A: hadoop-aws is not on the session's "
            f"classpath ({jars.missing_message('s3a')}, then start the session with those jars); "
            "use reader='pyarrow' or 'auto'"
        )
    return (
        f"Spark's filesystem cannot read {store.uri!r} (no Hadoop connector for its scheme, "
        "or file names Hadoop would misread); use reader='pyarrow' or 'auto'"
    )


def _pyarrow_scan(
    spark: SparkSession, store: Store, keys: Sequence[str], schema: pa.Schema
) -> DataFrame:
    paths = [store.fs_path(k) for k in keys]
    slices = max(1, min(len(paths), spark.sparkContext.defaultParallelism * 2))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        filesystem = store.filesystem
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from file_batches(filesystem, paths[index], schema)

    return spark.range(0, len(paths), 1, slices).mapInArrow(read, spark_schema(schema))


def file_batches(filesystem: Any, path: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The batches of one data file in ``schema`` (missing columns NULL, narrower types cast)."""
    with filesystem.open_input_file(path) as source:
        parquet = pq.ParquetFile(source)
        present = [n for n in schema.names if n in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(batch_size=128 * 1024, columns=present):
            columns = [
                batch.column(f.name).cast(f.type)
                if f.name in present
                else pa.nulls(batch.num_rows, f.type)
                for f in schema
            ]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


def signed_entries(
    spark: SparkSession,
    store: Store,
    table_prefix: str,
    added: Sequence[FileMarker],
    removed: Sequence[FileMarker],
    schema: pa.Schema,
    *,
    reader: str = "auto",
) -> DataFrame:
    """The entries of ``added`` files, and those of ``removed`` files with the opposite sign:
    what a change set adds to any sign-weighted sum."""
    parts = []
    if added:
        parts.append(scan_files(spark, store, table_prefix, added, schema, reader=reader))
    if removed:
        parts.append(
            scan_files(spark, store, table_prefix, removed, schema, reader=reader).withColumn(
                DML_TYPE, (-col(DML_TYPE)).cast("tinyint")
            )
        )
    if not parts:
        return spark.createDataFrame([], spark_schema(schema))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out
