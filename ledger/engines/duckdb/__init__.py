"""The embedded DuckDB engine (see :class:`ledger.engines.base.Engine`): everything runs in
this process.

The modules are the engine's roles, named as in the Spark engine: ``session`` (connections),
``scan`` (data files -> relation), ``query`` (run a tree or SQL), ``write`` (rows -> files),
``rewrite`` (merges and rewrites), ``rmw`` (the reads of read-modify-write), ``changes``
(change entries) and ``errors`` (DuckDB's errors as the ledger's). Only this package imports
``duckdb`` at run time.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
from sqlglot import exp

from ledger.engines.base import Engine, RewriteJob, WriteTarget
from ledger.engines.duckdb import changes, errors, query, rewrite, scan, write
from ledger.writer import SortedFileSink, sort_columns

if TYPE_CHECKING:
    from ledger.changes import ChangeSet
    from ledger.log.entries import FileMarker
    from ledger.storage import Store

# Rows of the query's result held at once while its files are written.
REWRITE_BATCH_ROWS = 1024 * 1024


class DuckDBEngine:
    """DuckDB as an :class:`~ledger.engines.base.Engine`: sessions are connections (from
        :func:`ledger.engines.duckdb.session.connect`), relations are DuckDB relations. Each method
    calls its module's function when it runs, so wrapping that function (to time or watch it)
    wraps the engine's method too.

        >>> from contextlib import closing
        >>> from ledger.engines.duckdb.session import connect
        >>> from sqlglot import select
        >>> with closing(connect()) as con:
        ...     ENGINE.run(con, select("41 + 1 AS answer")).fetchall()
        [(42,)]
    """

    name = "duckdb"
    query_errors: tuple[type[Exception], ...] = errors.QUERY_ERRORS

    def scan(
        self,
        session: duckdb.DuckDBPyConnection,
        store: Store,
        table_prefix: str,
        files: Sequence[FileMarker],
        schema: pa.Schema,
    ) -> duckdb.DuckDBPyRelation:
        return scan.scan_files(session, store, table_prefix, files, schema)

    def run(
        self, session: duckdb.DuckDBPyConnection, tree: exp.Expression
    ) -> duckdb.DuckDBPyRelation:
        return query.run(session, tree)

    def write_entries(
        self,
        session: duckdb.DuckDBPyConnection,
        entries: duckdb.DuckDBPyRelation,
        target: WriteTarget,
    ) -> list[FileMarker]:
        return write.write_entries(entries, target.writer())

    def rewrite_files(
        self, session: duckdb.DuckDBPyConnection, job: RewriteJob
    ) -> list[FileMarker]:
        """In this process: the query's result is streamed, sorted, into the partition's files
        (the session is not used: the rewrite reads on a connection of its own)."""
        target = job.target
        sink = SortedFileSink(
            target.writer(),
            job.partition,
            file_rows=job.file_rows,
            row_group_rows=job.row_group_rows,
            expected_rows=sum(m.rows for m in job.files),
        )
        try:
            with rewrite.rewrite_entries(
                target.store,
                target.table_prefix,
                job.files,
                target.file_schema(),
                job.sql,
                sort_columns(target.config),
                REWRITE_BATCH_ROWS,
            ) as reader:
                for batch in reader:
                    sink.write(batch)
            return sink.close()
        except BaseException:
            sink.abort()
            for key in sink.keys:
                # Best effort: a file left behind is never committed, and vacuum collects it.
                with contextlib.suppress(Exception):
                    target.store.delete(key)
            raise

    def change_entries(
        self,
        session: duckdb.DuckDBPyConnection,
        store: Store,
        table_prefix: str,
        change_set: ChangeSet,
        schema: pa.Schema,
    ) -> duckdb.DuckDBPyRelation:
        return changes.change_entries(session, store, table_prefix, change_set, schema)


ENGINE: Engine[duckdb.DuckDBPyConnection, duckdb.DuckDBPyRelation] = DuckDBEngine()
