"""The views as DataFrames: a snapshot's files scanned, bound as temporary views, and the
Spark rendering of the shared view text run over them (``ledger.spark`` checks the arguments
and calls these)."""

from __future__ import annotations

from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from ledger.changes import ChangeSet
from ledger.engines.spark import query
from ledger.engines.spark.changes import change_entries
from ledger.engines.spark.scan import scan_files
from ledger.errors import InvalidArgumentError
from ledger.reads.history import HistoryRequest
from ledger.schema import DML_TYPE, TRX_ID, TRX_SEQ
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.sql.spec import TableSpec
from ledger.sql.view_text import view_text
from ledger.sql.visible import shown_columns
from ledger.table import Table
from ledger.writer import file_schema
from merge_policies.base import AGGREGATED


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
    """The view ``kind`` (``visible``, ``totals``) of ``snap`` with ``options``, restricted to
    ``partitions`` as the embedded views restrict it (:mod:`ledger.reads.partitions`)."""
    read = snap.partition_read(partitions, entries=kind == "totals")
    spec = TableSpec.of(snap.state)
    schema = file_schema(snap.state.schema, snap.state.config)
    scanned = scan_files(session, snap.store, snap.prefix, read.markers, schema, reader=reader)
    names = query.bind_relations({"entries": scanned})
    if read.exact:
        return query.run(session, view_text(spec, kind, "spark", names["entries"], **options))
    if spec.policy.visible_rows == AGGREGATED or not spec.policy.keys_independent:
        raise InvalidArgumentError(
            f"{kind} of {snap.name!r} restricted to partitions needs every file and rows kept "
            "by their computed partition, which only the embedded views do: read it with "
            f"views.{kind}(..., partitions=...), or on Spark without partitions= and filter"
        )
    # Each visible row is an insertion of the file it lives in: the rows of the chosen
    # partitions are those whose entry is in a chosen file.
    keys = [*spec.key_columns, TRX_ID, TRX_SEQ]
    rows = query.run(
        session, view_text(spec, "visible", "spark", names["entries"], system_columns=True)
    )
    chosen = scan_files(
        session, snap.store, snap.prefix, snap.markers(partitions), schema, reader=reader
    )
    inserted = chosen.where(F.col(DML_TYPE) == 1).select(*keys)
    kept = rows.join(inserted, on=keys, how="left_semi")
    if kind == "visible":
        return kept.select(*shown_columns(spec, bool(options.get("system_columns"))))
    as_entries = kept.withColumn(DML_TYPE, F.lit(1).cast("tinyint"))
    restricted = query.bind_relations({"entries": as_entries})
    return query.run(session, view_text(spec, kind, "spark", restricted["entries"], **options))


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
