"""The change entries between two versions of a table, as DataFrames (the change feed's rows
before the generated query gives each its ``_change_type``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ledger.engines.spark.convert import spark_schema
from ledger.engines.spark.query import arrow_frame, bind_relations, run
from ledger.engines.spark.scan import scan_files, signed_entries
from ledger.sql.changes import replaced_entries, written_entries
from ledger.sql.dialects import DIALECTS
from ledger.sql.names import COMMIT_TIMESTAMP, COMMIT_VERSION
from ledger.sql.trees import render
from ledger.storage import Store

SPARK = DIALECTS["spark"]


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
    ``_commit_timestamp``, by the queries ``engines.duckdb.changes.change_entries`` runs
    (``ledger.sql.changes``): entries of written files joined to their commit by ``trx_id``;
    for each commit that replaced files, the entries of its removed (negated) and added files
    netted per value tuple, each left as many times as its net sign says."""
    columns = [f.name for f in schema]
    parts: list[DataFrame] = []
    if changes.written:
        names = bind_relations(
            {
                "written": scan_files(
                    spark, store, table_prefix, list(changes.written), schema, reader=reader
                ),
                "commits": arrow_frame(spark, changes.commit_stamps()),
            }
        )
        query = written_entries(names["written"], names["commits"], columns)
        parts.append(run(spark, render(query, SPARK)))
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
        name = bind_relations({"replaced": signed})["replaced"]
        query = replaced_entries(name, columns, commit.version, commit.timestamp_ms, SPARK)
        parts.append(run(spark, render(query, SPARK)))
    if not parts:
        extra = [(COMMIT_VERSION, pa.int64()), (COMMIT_TIMESTAMP, pa.timestamp("us", "UTC"))]
        return spark.createDataFrame([], spark_schema(pa.schema([*schema, *extra])))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out
