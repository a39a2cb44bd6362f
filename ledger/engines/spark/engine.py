"""Spark as an :class:`~ledger.engines.base.Engine`: sessions are SparkSessions, relations are
DataFrames. Reads are lazy DataFrames; writes and rewrites run on the executors, which write
the files themselves and send back only their markers.

>>> from ledger.engines import engine_named
>>> engine_named("spark").run(spark, select("41 + 1 AS answer")).collect()  # doctest: +SKIP
[Row(answer=42)]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from sqlglot import exp

from ledger.engines.base import Engine, RewriteJob, WriteTarget
from ledger.engines.spark import changes, errors, query, rewrite, scan, write
from ledger.sql.dialects import DIALECTS
from ledger.sql.trees import render

if TYPE_CHECKING:
    from ledger.changes import ChangeSet
    from ledger.log.entries import FileMarker
    from ledger.storage import Store

SPARK = DIALECTS["spark"]


class SparkEngine:
    """Each method calls its module's function when it runs (as the DuckDB engine does)."""

    name = "spark"
    query_errors: tuple[type[Exception], ...] = errors.QUERY_ERRORS

    def scan(
        self,
        session: SparkSession,
        store: Store,
        table_prefix: str,
        files: Sequence[FileMarker],
        schema: pa.Schema,
    ) -> DataFrame:
        return scan.scan_files(session, store, table_prefix, files, schema)

    def run(self, session: SparkSession, tree: exp.Expression) -> DataFrame:
        return query.run(session, render(tree, SPARK))

    def write_entries(
        self, session: SparkSession, entries: DataFrame, target: WriteTarget
    ) -> list[FileMarker]:
        with errors.task_errors(f"writing {target.table_prefix.rstrip('/')!r}"):
            return write.write_numbered(entries, target)

    def rewrite_files(self, session: SparkSession, job: RewriteJob) -> list[FileMarker]:
        return rewrite.rewrite_files(session, job)

    def change_entries(
        self,
        session: SparkSession,
        store: Store,
        table_prefix: str,
        change_set: ChangeSet,
        schema: pa.Schema,
    ) -> DataFrame:
        return changes.change_entries(session, store, table_prefix, change_set, schema)


ENGINE: Engine[SparkSession, DataFrame] = SparkEngine()
