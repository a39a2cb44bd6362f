"""The views as DataFrames: a snapshot's files scanned, bound as temporary views, and the
Spark rendering of the shared view text run over them (``ledger.spark`` checks the arguments
and calls these)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession

from ledger.changes import ChangeSet
from ledger.engines.spark import query
from ledger.engines.spark.changes import change_entries
from ledger.engines.spark.scan import scan_files
from ledger.reads.history import HistoryRequest
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql.spec import TableSpec
from ledger.sql.view_text import view_text
from ledger.table import Table
from ledger.writer import file_schema


def entries(
    session: SparkSession, snap: Snapshot, reader: str, partitions: PartitionFilter = None
) -> DataFrame:
    """The raw ledger of ``snap`` (its files of ``partitions``) with the log's schema."""
    schema = file_schema(snap.state.schema, snap.state.config)
    return scan_files(
        session, snap.store, snap.prefix, snap.markers(partitions), schema, reader=reader
    )


def view(
    session: SparkSession,
    snap: Snapshot,
    kind: str,
    reader: str,
    partitions: PartitionFilter,
    **options: Any,
) -> DataFrame:
    """The view ``kind`` (``visible``, ``totals``) of ``snap`` with ``options``."""
    names = query.bind_relations({"entries": entries(session, snap, reader, partitions)})
    text = view_text(TableSpec.of(snap.state), kind, "spark", names["entries"], **options)
    return query.run(session, text)


def history(session: SparkSession, request: HistoryRequest, reader: str) -> DataFrame:
    """Every entry of the request's keys, oldest first, over only the files that may hold
    them."""
    snap = request.snapshot
    scanned = scan_files(
        session, snap.store, snap.prefix, request.files, request.file_schema, reader=reader
    )
    names = query.bind_relations(
        {
            "history_entries": scanned,
            "history_keys": query.arrow_frame(session, request.keys),
            "history_commits": query.arrow_frame(session, request.commits),
        }
    )
    text = request.sql(
        "spark",
        entries=names["history_entries"],
        keys=names["history_keys"],
        commits=names["history_commits"],
    )
    return query.run(session, text)


def changes(session: SparkSession, table: Table, found: ChangeSet, reader: str) -> DataFrame:
    """The change feed of ``found`` (a change set of ``table``)."""
    snap = table.snapshot(found.until)
    schema = file_schema(snap.state.schema, snap.state.config)
    changed = change_entries(session, snap.store, snap.prefix, found, schema, reader=reader)
    names = query.bind_relations({"changes": changed})
    text = view_text(TableSpec.of(snap.state), "changes", "spark", names["changes"])
    return query.run(session, text)
