"""The change entries between two versions of a table, as DataFrames (the change feed's rows
before the generated query gives each its ``_change_type``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from ledger.engines.spark.convert import col, spark_schema
from ledger.engines.spark.scan import scan_files, signed_entries
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ
from ledger.sql.names import (
    COMMIT_TIMESTAMP,
    COMMIT_VERSION,
    COMMITS_MS,
    COMMITS_TRX_ID,
    COMMITS_VERSION,
    COPY,
    NET,
)
from ledger.storage import Store


def change_entries(
    spark: SparkSession,
    store: Store,
    table_prefix: str,
    changes: Any,
    schema: pa.Schema,
    *,
    reader: str = "auto",
) -> DataFrame:
    """The entries of a change set (``ledger.changes.ChangeSet``) with ``_commit_version`` and
    ``_commit_timestamp``, as ``engines.duckdb.changes.change_entries`` gives them: entries of
    written files joined to their commit by ``trx_id``; for each commit that replaced files,
    the entries of its removed (negated) and added files netted per value tuple, each left as
    many times as its net sign says."""
    columns = [f.name for f in schema]
    values = [c for c in columns if c not in (TRX_ID, TRX_SEQ, DML_TYPE)]
    stamp = T.TimestampType()
    parts: list[DataFrame] = []
    if changes.written:
        commits = spark.createDataFrame(
            [(trx, version, ms) for trx, (version, ms) in changes.commits.items()],
            f"{COMMITS_TRX_ID} bigint, {COMMITS_VERSION} bigint, {COMMITS_MS} bigint",
        )
        written = scan_files(
            spark, store, table_prefix, list(changes.written), schema, reader=reader
        )
        parts.append(
            written.join(F.broadcast(commits), col(TRX_ID) == F.col(COMMITS_TRX_ID)).select(
                *map(col, columns),
                F.col(COMMITS_VERSION).alias(COMMIT_VERSION),
                F.timestamp_millis(F.col(COMMITS_MS)).cast(stamp).alias(COMMIT_TIMESTAMP),
            )
        )
    for commit in changes.replaced:
        if not commit.added and not commit.removed:
            continue
        signed = signed_entries(
            spark,
            store,
            table_prefix,
            list(commit.added),
            list(commit.removed),
            schema,
            reader=reader,
        )
        netted = (
            signed.groupBy(*map(col, values))
            .agg(
                F.max(col(TRX_ID)).alias(TRX_ID),
                F.max(col(TRX_SEQ)).alias(TRX_SEQ),
                F.sum(col(DML_TYPE)).alias(NET),
            )
            .filter(F.col(NET) != 0)
        )
        copies = netted.withColumn(
            COPY, F.explode(F.sequence(F.lit(1), F.abs(F.col(NET))))
        ).withColumn(DML_TYPE, F.signum(F.col(NET)).cast("tinyint"))
        parts.append(
            copies.select(
                *map(col, columns),
                F.lit(commit.version).cast("bigint").alias(COMMIT_VERSION),
                F.timestamp_millis(F.lit(commit.timestamp_ms)).cast(stamp).alias(COMMIT_TIMESTAMP),
            )
        )
    if not parts:
        extra = [(COMMIT_VERSION, pa.int64()), (COMMIT_TIMESTAMP, pa.timestamp("us", "UTC"))]
        return spark.createDataFrame([], spark_schema(pa.schema([*schema, *extra])))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out
