"""The same ledger tables from PySpark: writes from DataFrames, reads and views as DataFrames,
merges and rollup refreshes on a cluster, and a Structured Streaming sink.

>>> import ledger, ledger.spark as ls
>>> wh = ledger.connect("./warehouse")                                      # doctest: +SKIP
>>> accounts = wh.table("accounts")                                         # doctest: +SKIP
>>> ls.upsert(accounts, spark.createDataFrame([("A-1", 90)], "account string, amount bigint"))
...                                                                         # doctest: +SKIP
>>> ls.visible(accounts).show()                                             # doctest: +SKIP

Executors write the Parquet files themselves (the writer every engine shares) and send back only
their file markers; the driver commits one log entry, with the same commit, conflict and
idempotency rules as the embedded engine. Needs ``pip install 'ledger-tables[spark]'``.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ledger.changes import change_set
from ledger.errors import InvalidArgumentError
from ledger.maintenance.merge import MergeResult
from ledger.publish.plan import PublishResult
from ledger.publish.target import target_plan
from ledger.reads.history import history_request
from ledger.rollup import RefreshResult, Rollup
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.table import AUTO_RETRIES, Table
from ledger.transaction import Transaction

if TYPE_CHECKING:
    from ledger.engines.spark.session import DataFrame, SparkSession
    from ledger.warehouse import Warehouse

_ROWS_PER_MERGE_TASK = 4 * 1024 * 1024

# Each verb imports the engine (ledger/engines/spark/) when called: importing ledger.spark does
# not load PySpark.

# --- reads ---------------------------------------------------------------------------------------


READERS = ("auto", "spark", "s3a", "pyarrow")


def _check_reader(reader: str) -> None:
    if reader not in READERS:
        raise InvalidArgumentError(
            f"reader must be one of {', '.join(map(repr, READERS))}, not {reader!r}"
        )


def _snapshot(
    table: Table | Rollup | Snapshot, version: int | None, timestamp: dt.datetime | int | None
) -> Snapshot:
    if isinstance(table, Snapshot):
        if version is not None or timestamp is not None:
            raise InvalidArgumentError("a snapshot has its version already: pass no version")
        return table
    if isinstance(table, Rollup):  # read as its own (aggregating) table, as views do
        table = table.table
    if not isinstance(table, Table):
        raise InvalidArgumentError(
            f"expected a Table, a Rollup or a Snapshot, not {type(table).__name__}"
        )
    return table.snapshot(version, timestamp)


def read(
    table: Table | Rollup | Snapshot,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    partitions: PartitionFilter = None,
    spark: SparkSession | None = None,
    reader: str = "auto",
) -> DataFrame:
    """The raw ledger of a snapshot (every entry, system columns included) as a DataFrame,
    built from the log's file list with the log's schema. ``reader``: ``auto`` (Spark's own
    Parquet reader where its filesystem reads the store: local disk, or S3 through Hadoop's S3A
    connector when ``hadoop-aws`` is on the session's classpath; else pyarrow on the
    executors), ``spark`` (Spark's reader or an error), ``s3a`` (the same, for an S3 store)
    or ``pyarrow``.

    >>> ledger.spark.read(accounts, version=3).groupBy("dml_type").count()  # doctest: +SKIP
    """
    from ledger.engines.spark import reads
    from ledger.engines.spark.session import session

    _check_reader(reader)
    return reads.entries(session(spark), _snapshot(table, version, timestamp), reader, partitions)


def _view(
    snap: Snapshot,
    kind: str,
    spark: SparkSession | None,
    reader: str,
    partitions: PartitionFilter,
    **options: Any,
) -> DataFrame:
    from ledger.engines.spark import reads
    from ledger.engines.spark.session import session

    _check_reader(reader)
    return reads.view(session(spark), snap, kind, reader, partitions, **options)


def visible(
    table: Table | Rollup | Snapshot,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    partitions: PartitionFilter = None,
    system_columns: bool = False,
    spark: SparkSession | None = None,
    reader: str = "auto",
) -> DataFrame:
    """The visible rows of a snapshot as a DataFrame: the Spark dialect of the same generated
    SQL as ``views.visible`` (see docs/views.md); ``partitions`` restricts it as there (files
    chosen from the log; docs/spark.md).

    >>> ledger.spark.visible(accounts).filter("amount > 100").count()        # doctest: +SKIP
    """
    snap = _snapshot(table, version, timestamp)
    return _view(snap, "visible", spark, reader, partitions, system_columns=system_columns)


def totals(
    table: Table | Rollup | Snapshot,
    by: Sequence[str] | str | None = None,
    sum: Sequence[str] | str | None = None,
    count: bool = True,
    avg: Sequence[str] | str | None = None,
    where: str | None = None,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    partitions: PartitionFilter = None,
    spark: SparkSession | None = None,
    reader: str = "auto",
) -> DataFrame:
    """Exact COUNT/SUM/AVG per group, weighted by ``dml_type``, as a DataFrame (the Spark
    dialect of ``views.totals``; ``where`` is DuckDB SQL, translated; ``partitions`` restricts
    it as there).

    >>> ledger.spark.totals(payments, by="day", sum="amount").show()          # doctest: +SKIP
    """
    snap = _snapshot(table, version, timestamp)
    return _view(
        snap, "totals", spark, reader, partitions, by=by, sum=sum, count=count, avg=avg, where=where
    )


def history(
    table: Table | Rollup | Snapshot,
    key: Any,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    spark: SparkSession | None = None,
    reader: str = "auto",
) -> DataFrame:
    """Every entry of a key (or of a list of keys) as a DataFrame, oldest first, with its
    commit's version and time: the Spark dialect of the same query as ``views.history``, over
    only the files whose key ranges may hold the keys.

    >>> ledger.spark.history(accounts, "A-1").show()                         # doctest: +SKIP
    """
    from ledger.engines.spark import reads
    from ledger.engines.spark.session import session

    _check_reader(reader)
    request = history_request(_snapshot(table, version, timestamp), key)
    return reads.history(session(spark), request, reader)


def changes(
    table: Table | Rollup,
    since_version: int,
    until_version: int | None = None,
    *,
    spark: SparkSession | None = None,
    reader: str = "auto",
) -> DataFrame:
    """The change feed as a DataFrame: every entry committed after ``since_version`` (up to
    ``until_version``, default the latest) with ``_change_type``, ``_commit_version`` and
    ``_commit_timestamp``, exactly as ``views.changes`` gives it (the Spark dialect of the
    same generated SQL).

    >>> ledger.spark.changes(accounts, since_version=10).show()              # doctest: +SKIP
    """
    from ledger.engines.spark import reads
    from ledger.engines.spark.session import session

    if isinstance(table, Rollup):
        table = table.table
    if not isinstance(table, Table):
        raise InvalidArgumentError("changes read a Table (its log), not a snapshot")
    _check_reader(reader)
    return reads.changes(
        session(spark), table, change_set(table, since_version, until_version), reader
    )


def register(
    warehouse: Warehouse, *, spark: SparkSession | None = None, reader: str = "auto"
) -> list[str]:
    """Register every table of ``warehouse`` as temporary views: ``<name>`` (visible rows at
    the latest version) and ``<name>_ledger`` (the raw ledger). Returns the view names.

    >>> ledger.spark.register(wh); spark.sql("SELECT count(*) FROM accounts")  # doctest: +SKIP
    """
    from ledger.engines.spark.session import session as spark_session

    session = spark_session(spark)
    names = []
    for name in warehouse.tables():
        table = warehouse.table(name)
        snap = table.snapshot()
        read(snap, spark=session, reader=reader).createOrReplaceTempView(f"{name}_ledger")
        visible(snap, spark=session, reader=reader).createOrReplaceTempView(name)
        names += [name, f"{name}_ledger"]
    return names


# --- writes --------------------------------------------------------------------------------------


def insert(
    target: Table | Transaction,
    data: DataFrame,
    *,
    app_id: str | None = None,
    batch: int | None = None,
    evolve_schema: bool = False,
) -> Any:
    """Append the rows of a DataFrame blindly. On a Table: one commit, returns its
    :class:`CommitInfo` (``app_id`` and ``batch`` make it idempotent, as for
    ``Table.insert``); on a Transaction: part of it, returns the number of rows.

    >>> ledger.spark.insert(events, spark.read.json("s3://raw/events/"))      # doctest: +SKIP
    """
    return _run(
        target, _Commit(evolve_schema, app_id, batch), lambda tx: _write(tx, data, "insert")
    )


def append_entries(
    target: Table | Transaction,
    data: DataFrame,
    *,
    app_id: str | None = None,
    batch: int | None = None,
    evolve_schema: bool = False,
) -> Any:
    """Append entries that carry their own ``dml_type`` (+1 insert, -1 delete mark), as
    ``Table.append_entries``."""
    commit = _Commit(evolve_schema, app_id, batch)
    return _run(target, commit, lambda tx: _write(tx, data, "entries"))


def upsert(
    target: Table | Transaction,
    data: DataFrame,
    *,
    evolve_schema: bool = False,
    retries: int = AUTO_RETRIES,
    app_id: str | None = None,
    batch: int | None = None,
) -> Any:
    """Insert rows of new keys, replace the visible row of existing ones (a Spark join against
    the visible rows at the transaction's snapshot finds the entries to mark). On a Table a
    conflict is retried up to ``retries`` times, as by ``Table.upsert``."""
    commit = _Commit(evolve_schema, app_id, batch, retries)
    return _run(target, commit, lambda tx: _modify(tx, data, "upsert"))


def update(
    target: Table | Transaction,
    data: DataFrame,
    *,
    evolve_schema: bool = False,
    retries: int = AUTO_RETRIES,
    app_id: str | None = None,
    batch: int | None = None,
) -> Any:
    """Replace the visible row of existing keys; every key must exist
    (:class:`KeyNotFoundError`, nothing written). Retried on conflicts, as ``upsert``."""
    commit = _Commit(evolve_schema, app_id, batch, retries)
    return _run(target, commit, lambda tx: _modify(tx, data, "update"))


def delete(
    target: Table | Transaction,
    keys: DataFrame,
    *,
    retries: int = AUTO_RETRIES,
    app_id: str | None = None,
    batch: int | None = None,
) -> Any:
    """Delete the rows of the keys in a DataFrame (its key columns; other columns ignored; a
    repeated key is deleted once). Retried on conflicts, as ``upsert``."""
    commit = _Commit(False, app_id, batch, retries)
    return _run(target, commit, lambda tx: _modify(tx, keys, "delete"))


@dataclass(frozen=True)
class _Commit:
    """How a verb on a Table commits (the keyword arguments of the Table verbs)."""

    evolve_schema: bool
    app_id: str | None
    batch: int | None
    retries: int = 0


def _run(
    target: Table | Transaction, commit: _Commit, operation: Callable[[Transaction], int]
) -> Any:
    """Run ``operation`` in ``target`` (a Transaction), or in a new transaction of ``target``
    (a Table) committed at once; a conflict starts a fresh transaction, ``retries`` times (the
    DataFrame is evaluated again, against the newer snapshot)."""
    if isinstance(target, Transaction):
        if commit.evolve_schema and not target.evolves_schema:
            raise InvalidArgumentError(
                "evolve_schema is set when the transaction is made: "
                "table.transaction(evolve_schema=True)"
            )
        if commit.app_id is not None or commit.batch is not None:
            raise InvalidArgumentError(
                "app_id and batch are set when the transaction is made: "
                "table.transaction(app_id=..., batch=...)"
            )
        return operation(target)
    if not isinstance(target, Table):
        raise InvalidArgumentError(
            f"write to a Table or a Transaction, not {type(target).__name__}"
        )
    return target.retrying(
        operation,
        evolve_schema=commit.evolve_schema,
        retries=commit.retries,
        app_id=commit.app_id,
        batch=commit.batch,
    )


def _write(tx: Transaction, data: DataFrame, mode: str) -> int:
    from ledger.engines.spark.write import insert

    return insert(tx, data, mode)


def _modify(tx: Transaction, data: DataFrame, operation: str) -> int:
    from ledger.engines.spark.rmw import read_modify_write

    return read_modify_write(tx, data, operation)


# --- merges and rollups --------------------------------------------------------------------------


def merge(
    table: Table,
    partitions: PartitionFilter = None,
    *,
    spark: SparkSession | None = None,
    rows_per_task: int = _ROWS_PER_MERGE_TASK,
    **options: Any,
) -> MergeResult:
    """:meth:`Table.merge` executed on Spark: each partition's entries are spread over tasks by
    key range (every entry of a key in one task), the table's merge policy runs on each range
    and executors write the result; one commit with the same rules as an embedded merge.
    ``options`` are those of :meth:`Table.merge`.

    >>> ledger.spark.merge(events, partitions={"day": "2026-11-20"})           # doctest: +SKIP
    """
    if rows_per_task < 1:
        raise InvalidArgumentError("rows_per_task must be at least 1")
    from ledger.engines.spark.rewrite import merge as merge_on_spark
    from ledger.engines.spark.session import session

    return merge_on_spark(session(spark), table, partitions, rows_per_task, **options)


def refresh(rollup: Rollup, *, spark: SparkSession | None = None) -> RefreshResult:
    """:meth:`Rollup.refresh` with the group deltas computed on Spark (exactly once, as on the
    embedded engine).

    >>> ledger.spark.refresh(wh.rollup("views_by_page"))                     # doctest: +SKIP
    """
    from ledger.engines.spark.rollups import deltas_on

    return rollup.refresh_with(deltas_on(spark))


def rebuild(rollup: Rollup, *, spark: SparkSession | None = None) -> RefreshResult:
    """:meth:`Rollup.rebuild` with the totals computed on Spark."""
    from ledger.engines.spark.rollups import deltas_on

    return rollup.refresh_with(deltas_on(spark), rebuild=True)


# --- streaming -----------------------------------------------------------------------------------


def stream_sink(
    table: Table, *, operation: str = "insert", evolve_schema: bool = False
) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function that writes each micro-batch into ``table`` exactly once:
    the commit carries the streaming query's id and the batch id as its idempotency key, so a
    query restarted from its checkpoint skips the batches already committed.

    >>> (stream.writeStream.foreachBatch(ledger.spark.stream_sink(events))
    ...     .option("checkpointLocation", "/chk/events").start())            # doctest: +SKIP
    """
    from ledger.engines.spark.streaming import batch_writer

    return batch_writer(table, operation, evolve_schema)


def committed_batch(table: Table, query_id: str) -> int | None:
    """The last micro-batch of streaming query ``query_id`` committed into ``table``.

    >>> ledger.spark.committed_batch(events, query.id)                     # doctest: +SKIP
    3
    """
    from ledger.engines.spark import streaming

    return streaming.committed_batch(table, query_id)


__all__ = [
    "append_entries",
    "changes",
    "committed_batch",
    "delete",
    "history",
    "insert",
    "merge",
    "publish_delta",
    "read",
    "rebuild",
    "refresh",
    "register",
    "stream_sink",
    "totals",
    "update",
    "upsert",
    "visible",
]


def publish_delta(
    source: Table | Rollup, target: str, *, spark: SparkSession | None = None
) -> PublishResult:
    """Publish a table's visible rows (or a rollup's totals) into the Delta table at
    ``target`` through delta-spark, incrementally and exactly once, as
    ``views.publish_delta`` does from the embedded engine (same plan, same checks, same
    recorded version: either writer can continue the other's publishes). Needs the Delta Lake
    jars on the Spark classpath (``make jars``; see ``ledger.engines.spark.jars``). The
    result's row counts are the plan's (keys replaced, rows written), not Delta's merge metrics.

    >>> ledger.spark.publish_delta(wh.table("customers"), "/lake/customers")  # doctest: +SKIP
    """
    from ledger.engines.spark.publish import delta_publish, require_delta
    from ledger.engines.spark.session import session as spark_session

    session = spark_session(spark)
    require_delta(session)
    plan = target_plan(source, target)
    if plan.up_to_date:
        return PublishResult(
            plan.previous if plan.previous is not None else plan.version,
            plan.previous,
            0,
            0,
            False,
            True,
            base_version=plan.base_version,
            reason=plan.reason,
        )
    delta_version = delta_publish(session, target, plan)
    return PublishResult(
        plan.version,
        plan.previous,
        0 if plan.full else plan.changed_keys.num_rows,
        plan.rows.num_rows,
        plan.full,
        False,
        delta_version=delta_version,
        base_version=plan.base_version,
        reason=plan.reason,
    )
