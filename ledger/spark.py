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
import math
import uuid
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from ledger.errors import (
    DuplicateKeyError,
    InvalidArgumentError,
    KeyNotFoundError,
    MissingKeyError,
    SchemaError,
    StaleVersionError,
    TypeMismatchError,
)
from ledger.log.entries import FileMarker
from ledger.log.state import TableState
from ledger.maintenance import merge as merging
from ledger.rollup import DeltaRequest, RefreshResult, Rollup
from ledger.schema import DML_TYPE, ROW_ID, check_data_names, conform
from ledger.snapshot import PartitionFilter, Snapshot
from ledger.table import AUTO_RETRIES, Table
from ledger.transaction import Transaction
from ledger.writer import file_schema
from merge_policies import load_policy
from merge_policies.dedup import DedupPolicy
from merge_policies.replacing import ReplacingPolicy

if TYPE_CHECKING:
    from ledger.engines.spark import DataFrame, SparkSession
    from ledger.warehouse import Warehouse

_ROWS_PER_MERGE_TASK = 4 * 1024 * 1024


def _engine() -> Any:
    from ledger.engines import spark as engine

    return engine


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
    _check_reader(reader)
    engine = _engine()
    snap = _snapshot(table, version, timestamp)
    schema = file_schema(snap.state.schema, snap.state.config)
    frame: DataFrame = engine.scan_files(
        engine.session(spark),
        snap.store,
        snap.prefix,
        snap.markers(partitions),
        schema,
        reader=reader,
    )
    return frame


def _view(
    snap: Snapshot, kind: str, spark: SparkSession | None, reader: str, **options: Any
) -> DataFrame:
    import views

    engine = _engine()
    session = engine.session(spark)
    name = f"__ledger_entries_{uuid.uuid4().hex[:12]}"
    read(snap, spark=session, reader=reader).createOrReplaceTempView(name)
    text = views.sql(snap, kind, dialect="spark", source=name, **options)
    frame: DataFrame = session.sql(text)
    return frame


def visible(
    table: Table | Rollup | Snapshot,
    *,
    version: int | None = None,
    timestamp: dt.datetime | int | None = None,
    system_columns: bool = False,
    spark: SparkSession | None = None,
    reader: str = "auto",
) -> DataFrame:
    """The visible rows of a snapshot as a DataFrame: the Spark dialect of the same generated
    SQL as ``views.visible`` (see docs/views.md).

    >>> ledger.spark.visible(accounts).filter("amount > 100").count()        # doctest: +SKIP
    """
    snap = _snapshot(table, version, timestamp)
    return _view(snap, "visible", spark, reader, system_columns=system_columns)


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
    spark: SparkSession | None = None,
    reader: str = "auto",
) -> DataFrame:
    """Exact COUNT/SUM/AVG per group, weighted by ``dml_type``, as a DataFrame (the Spark
    dialect of ``views.totals``; ``where`` is DuckDB SQL, translated).

    >>> ledger.spark.totals(payments, by="day", sum="amount").show()          # doctest: +SKIP
    """
    snap = _snapshot(table, version, timestamp)
    return _view(snap, "totals", spark, reader, by=by, sum=sum, count=count, avg=avg, where=where)


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
    from views.reading import history_request

    _check_reader(reader)
    engine = _engine()
    session = engine.session(spark)
    request = history_request(table, key, version=version, timestamp=timestamp)
    snap = request.snapshot
    tag = uuid.uuid4().hex[:12]
    names = {part: f"__ledger_history_{part}_{tag}" for part in ("entries", "keys", "commits")}
    engine.scan_files(
        session, snap.store, snap.prefix, request.files, request.file_schema, reader=reader
    ).createOrReplaceTempView(names["entries"])
    for part, rows in (("keys", request.keys), ("commits", request.commits)):
        session.createDataFrame(rows).createOrReplaceTempView(names[part])
    frame: DataFrame = session.sql(request.sql("spark", **names))
    return frame


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
    import views
    from ledger.changes import change_set

    if isinstance(table, Rollup):
        table = table.table
    if not isinstance(table, Table):
        raise InvalidArgumentError("changes read a Table (its log), not a snapshot")
    _check_reader(reader)
    engine = _engine()
    session = engine.session(spark)
    found = change_set(table, since_version, until_version)
    snap = table.snapshot(found.until)
    schema = file_schema(snap.state.schema, snap.state.config)
    entries = engine.change_entries(session, snap.store, snap.prefix, found, schema, reader=reader)
    name = f"__ledger_changes_{uuid.uuid4().hex[:12]}"
    entries.createOrReplaceTempView(name)
    frame: DataFrame = session.sql(views.sql(snap, "changes", dialect="spark", source=name))
    return frame


def register(
    warehouse: Warehouse, *, spark: SparkSession | None = None, reader: str = "auto"
) -> list[str]:
    """Register every table of ``warehouse`` as temporary views: ``<name>`` (visible rows at
    the latest version) and ``<name>_ledger`` (the raw ledger). Returns the view names.

    >>> ledger.spark.register(wh); spark.sql("SELECT count(*) FROM accounts")  # doctest: +SKIP
    """
    session = _engine().session(spark)
    names = []
    for name in warehouse.tables():
        table = warehouse.table(name)
        snap = table.snapshot()
        read(snap, spark=session, reader=reader).createOrReplaceTempView(f"{name}_ledger")
        visible(snap, spark=session, reader=reader).createOrReplaceTempView(name)
        names += [name, f"{name}_ledger"]
    return names


# --- writes --------------------------------------------------------------------------------------


def insert(target: Table | Transaction, data: DataFrame, *, evolve_schema: bool = False) -> Any:
    """Append the rows of a DataFrame blindly. On a Table: one commit, returns its
    :class:`CommitInfo`; on a Transaction: part of it, returns the number of rows.

    >>> ledger.spark.insert(events, spark.read.json("s3://raw/events/"))      # doctest: +SKIP
    """
    return _run(target, evolve_schema, lambda tx: _insert(tx, data, "insert"))


def append_entries(target: Table | Transaction, data: DataFrame, **kw: Any) -> Any:
    """Append entries that carry their own ``dml_type`` (+1 insert, -1 delete mark)."""
    return _run(target, kw.pop("evolve_schema", False), lambda tx: _insert(tx, data, "entries"))


def upsert(
    target: Table | Transaction,
    data: DataFrame,
    *,
    evolve_schema: bool = False,
    retries: int = AUTO_RETRIES,
) -> Any:
    """Insert rows of new keys, replace the visible row of existing ones (a Spark join against
    the visible rows at the transaction's snapshot finds the entries to mark). On a Table a
    conflict is retried up to ``retries`` times, as by ``Table.upsert``."""
    return _run(target, evolve_schema, lambda tx: _read_modify_write(tx, data, "upsert"), retries)


def update(
    target: Table | Transaction,
    data: DataFrame,
    *,
    evolve_schema: bool = False,
    retries: int = AUTO_RETRIES,
) -> Any:
    """Replace the visible row of existing keys; every key must exist
    (:class:`KeyNotFoundError`, nothing written). Retried on conflicts, as ``upsert``."""
    return _run(target, evolve_schema, lambda tx: _read_modify_write(tx, data, "update"), retries)


def delete(target: Table | Transaction, keys: DataFrame, *, retries: int = AUTO_RETRIES) -> Any:
    """Delete the rows of the keys in a DataFrame (its key columns; other columns ignored; a
    repeated key is deleted once). Retried on conflicts, as ``upsert``."""
    return _run(target, False, lambda tx: _read_modify_write(tx, keys, "delete"), retries)


def _run(
    target: Table | Transaction,
    evolve: bool,
    operation: Callable[[Transaction], int],
    retries: int = 0,
) -> Any:
    """Run ``operation`` in ``target`` (a Transaction), or in a new transaction of ``target``
    (a Table) committed at once; a conflict starts a fresh transaction, ``retries`` times (the
    DataFrame is evaluated again, against the newer snapshot)."""
    if isinstance(target, Transaction):
        if evolve and not target.evolves_schema:
            raise InvalidArgumentError(
                "evolve_schema is set when the transaction is made: "
                "table.transaction(evolve_schema=True)"
            )
        return operation(target)
    if not isinstance(target, Table):
        raise InvalidArgumentError(
            f"write to a Table or a Transaction, not {type(target).__name__}"
        )
    return target.retrying(operation, evolve_schema=evolve, retries=retries)


def _check_frame(data: Any) -> DataFrame:
    engine = _engine()
    if not isinstance(data, engine.DataFrame):
        raise InvalidArgumentError(
            f"ledger.spark writes a pyspark DataFrame, not {type(data).__name__}; the embedded "
            "engine (table.insert) takes Arrow, pandas and lists"
        )
    frame: DataFrame = data
    return frame


def _conformed_columns(tx: Transaction, data: DataFrame, *, require_keys: bool) -> DataFrame:
    """Check ``data``'s columns and types against the table before anything runs (evolving the
    schema if the transaction allows it) and cast each column to the table's type.

    The types are checked on the driver; the values in one Spark job that finds, per column,
    the values a cast would change (``engine.lossy``). The first such value of each column is
    then conformed on the driver by the embedded engine's own rules, so the same value gets the
    same typed error or, with ``evolve_schema``, widens the column the same way."""
    engine = _engine()
    config = tx.config
    columns = list(data.columns)
    check_data_names(columns)  # Spark cannot even select one of two names equal without case
    if ROW_ID in columns and not config.generated_row_id:
        raise SchemaError("_row_id is a system column; this table has a primary key")
    user = [c for c in columns if c not in (ROW_ID, DML_TYPE)]
    source = engine.arrow_schema(data.select(*map(engine.col, user)))
    keys = () if config.generated_row_id else config.key_columns
    _, schema = conform(
        source.empty_table(),
        tx.schema,
        key_columns=keys,
        allow_new_columns=tx.evolves_schema,
        require_all_keys=require_keys,
    )
    for _ in range(3):  # a widened column is checked again against its new type
        target = engine.spark_schema(file_schema(schema, config))
        changed = [c for c in user if data.schema[c].dataType != target[c].dataType]
        if not changed:
            break
        found = data.agg(
            *[
                engine.F.first(
                    engine.F.when(
                        engine.lossy(c, data.schema[c].dataType, target[c].dataType),
                        engine.col(c),
                    ),
                    ignorenulls=True,
                ).alias(f"v{i}")
                for i, c in enumerate(changed)
            ]
        ).collect()[0]
        bad = {c: found[f"v{i}"] for i, c in enumerate(changed) if found[f"v{i}"] is not None}
        if not bad:
            break
        before = schema
        for c, value in bad.items():
            example = pa.table([pa.array([value], source.field(c).type)], names=[c])
            _, schema = conform(
                example, schema, allow_new_columns=tx.evolves_schema, require_all_keys=False
            )
        if schema == before:
            raise TypeMismatchError(
                f"values of column(s) {sorted(bad)} do not fit the table's types without "
                f"changing ({ {c: schema.type_of(c) for c in bad} }), e.g. {bad}; nothing "
                "was written"
            )
    else:
        raise TypeMismatchError(f"values of column(s) {user} do not fit the table's types")
    tx.adopt_schema(schema)
    projected = [
        engine.converted(c, data.schema[c].dataType, target[c].dataType).alias(c)
        if data.schema[c].dataType != target[c].dataType
        else engine.col(c)
        for c in user
    ]
    if ROW_ID in columns:
        projected.append(engine.col(ROW_ID).cast("bigint").alias(ROW_ID))
    if DML_TYPE in columns:
        projected.append(engine.col(DML_TYPE))
    out: DataFrame = data.select(*projected)
    return out


def _insert(tx: Transaction, data: DataFrame, mode: str) -> int:
    engine = _engine()
    frame = _check_frame(data)
    if tx.begin_operation("insert" if mode == "insert" else "append_entries"):
        return 0
    F = engine.F
    if mode == "entries":
        if DML_TYPE not in frame.columns:
            raise SchemaError("append_entries needs a dml_type column (+1 insert, -1 mark)")
        signs = frame.agg(
            F.sum(
                F.when(
                    ~engine.col(DML_TYPE).isin(1, -1) | engine.col(DML_TYPE).isNull(), 1
                ).otherwise(0)
            ).alias("bad"),
            F.sum(F.when(engine.col(DML_TYPE) == -1, 1).otherwise(0)).alias("marks"),
            F.sum(
                F.when(
                    (engine.col(DML_TYPE) == -1)
                    & (engine.col(ROW_ID).isNull() if ROW_ID in frame.columns else F.lit(True)),
                    1,
                ).otherwise(0)
            ).alias("anonymous"),
        ).collect()[0]
        if signs["bad"]:
            raise TypeMismatchError("dml_type must be +1 or -1 in every row, never NULL")
        if tx.config.generated_row_id and signs["anonymous"]:
            raise MissingKeyError(
                "delete marks on a table without a primary key must carry the _row_id of the "
                "entry they cancel"
            )
        tx.refuse_marks_if_insert_only(int(signs["marks"] or 0))
    elif DML_TYPE in frame.columns:
        raise SchemaError(
            "column 'dml_type' is a system column the ledger assigns; use append_entries to "
            "write entries with their own sign"
        )
    if mode == "insert":
        frame = _transformed(tx, frame)
    rows = _conformed_columns(tx, frame, require_keys=True)
    if mode == "entries" and signs["marks"]:
        _check_delete_marks(tx, rows)
    if DML_TYPE not in rows.columns:
        rows = rows.withColumn(DML_TYPE, F.lit(1).cast("tinyint"))
    rows = rows.withColumn(engine.KIND, F.lit(engine.INSERTIONS))
    markers, (_, written), rows = _write(tx, rows)
    deleted = 0
    touched = None
    if mode == "entries":
        marks = rows.filter(engine.col(DML_TYPE) == -1)
        touched = engine.to_arrow(marks.select(*map(engine.col, tx.key_columns)))
        deleted = touched.num_rows
    tx.add_written_files(markers, inserted=written - deleted, deleted=deleted, touched_keys=touched)
    return written


def _transformed(tx: Transaction, frame: DataFrame) -> DataFrame:
    """The rows as the table's insert transform (at the transaction's snapshot) shapes them."""
    sql = tx.config.insert_transform
    return frame if sql is None else _engine().insert_transformed(frame, sql)


def _check_delete_marks(tx: Transaction, rows: DataFrame) -> None:
    """The embedded engine's rule for hand-written marks, on the entries of the marked keys
    (brought to the driver: corrections are few), before any file is written."""
    engine = _engine()
    keys = list(tx.key_columns)
    marked = rows.filter(engine.col(DML_TYPE) == -1).select(*map(engine.col, keys)).distinct()
    tx.check_delete_marks(engine.to_arrow(rows.join(marked, on=keys, how="left_semi")))


def _write(
    tx: Transaction, entries: DataFrame, check: Callable[[int], None] | None = None
) -> tuple[list[FileMarker], tuple[int, int], DataFrame]:
    """Write an entries DataFrame (see ``ledger.engines.spark.WriteJob``) for ``tx``: count
    per Spark partition, claim ``trx_seq`` ranges (marks first), write on the executors.
    ``check(marks)`` runs after counting, before any file is written. Returns the markers, the
    numbers of marks and of all entries written, and the DataFrame the entries were written from.

    The counting job and the write job must see the same partitions. A DataFrame that yields
    other rows when evaluated again, or whose partitions Spark plans otherwise for the write
    (adaptive execution sizes a shuffle's partitions by the columns it carries), fails the
    write's own check; it is then checkpointed and counted and written once more. The first
    attempt's files are left to vacuum as orphans; nothing of it is committed."""
    engine = _engine()
    for attempt in range(2):
        try:
            markers, counts = _write_once(tx, entries, check)
            return markers, counts, entries
        except InvalidArgumentError as e:
            if attempt or engine.OTHER_ROWS not in str(e):
                raise
            entries = entries.localCheckpoint(eager=True)
    raise AssertionError("unreachable")


def _write_once(
    tx: Transaction, entries: DataFrame, check: Callable[[int], None] | None
) -> tuple[list[FileMarker], tuple[int, int]]:
    engine = _engine()
    config = tx.config
    keys = () if config.generated_row_id else config.key_columns
    counts = engine.count_partitions(entries, keys, config.generated_row_id)
    if counts.null_keys:
        raise MissingKeyError(
            f"primary-key column(s) {list(keys)} hold NULL in {counts.null_keys} row(s); every "
            "row needs a complete key"
        )
    total = sum(counts.rows.values())
    marks = sum(n for (_, kind), n in counts.rows.items() if kind == engine.MARKS)
    if check is not None:
        check(marks)
    if not total:
        return [], (0, 0)
    first_seq: dict[tuple[int, int], int] = {}
    for kind in (engine.MARKS, engine.INSERTIONS):
        parts = sorted(p for p, k in counts.rows if k == kind)
        start = tx.claim_entries(sum(counts.rows[(p, kind)] for p in parts))
        for p in parts:
            first_seq[(p, kind)] = start
            start += counts.rows[(p, kind)]
    first_row: dict[int, int] = {}
    start = tx.claim_row_ids(sum(counts.new_row_ids.values()))
    for p in sorted(counts.new_row_ids):
        first_row[p] = start
        start += counts.new_row_ids[p]
    job = engine.WriteJob(
        store=tx.table.store,
        table_prefix=tx.table.prefix,
        schema=tx.schema,
        config=config,
        trx_id=tx.trx_id,
        first_seq=first_seq,
        first_row=first_row,
        expected=counts.rows,
    )
    with engine.task_errors(f"writing {tx.table.name!r}"):
        markers: list[FileMarker] = engine.write_entries(entries, job)
    return markers, (marks, total)


def _read_modify_write(tx: Transaction, data: DataFrame, operation: str) -> int:
    engine = _engine()
    F = engine.F
    frame = _check_frame(data)
    if tx.begin_operation(operation):
        return 0
    config = tx.config
    if operation == "upsert" and config.generated_row_id:
        raise InvalidArgumentError(
            f"upsert needs a primary key and table {tx.table.name!r} has none; use insert for "
            "new rows, or update/delete by _row_id"
        )
    key_columns = list(tx.key_columns)
    if operation != "delete":
        frame = _transformed(tx, frame)
    if operation == "delete":
        missing = [k for k in key_columns if k not in frame.columns]
        if missing:
            raise MissingKeyError(f"keys must give every key column; missing {missing}")
        frame = frame.select(*map(engine.col, key_columns))
    if config.generated_row_id and ROW_ID not in frame.columns:
        raise MissingKeyError("rows of a table without a primary key are addressed by _row_id")
    rows = _conformed_columns(tx, frame, require_keys=True)
    if operation == "delete":
        rows = rows.dropDuplicates(key_columns)  # deleting a key twice deletes it once
    has_null, duplicated = engine.key_problems(rows, key_columns)
    if has_null:
        raise MissingKeyError(f"key column(s) {key_columns} hold NULL; every row needs a key")
    if duplicated:
        raise DuplicateKeyError(
            f"key(s) appear more than once in one operation, e.g. {duplicated}; give each key "
            "once (or split the changes into separate operations)"
        )
    state = tx.base_state
    files = [*state.alive_files, *tx.written_files]
    schema = file_schema(tx.schema, config)
    session = frame.sparkSession
    entries = engine.scan_files(session, tx.table.store, tx.table.prefix, files, schema)
    value_columns = [*tx.schema.names, *([ROW_ID] if config.generated_row_id else [])]
    latest_first = _latest_order(state)
    current, live = engine.live_entries(entries, rows, key_columns, value_columns, latest_first)
    if operation == "update":
        absent = rows.join(current.select(*map(engine.col, key_columns)), key_columns, "left_anti")
        examples = absent.select(*map(engine.col, key_columns)).limit(3).collect()
        if examples:
            raise KeyNotFoundError(
                f"update of key(s) with no visible row, e.g. {[r.asDict() for r in examples]}; "
                "use upsert to insert new keys"
            )
    marks = live.withColumn(DML_TYPE, F.lit(-1).cast("tinyint")).withColumn(
        engine.KIND, F.lit(engine.MARKS)
    )
    written = marks
    if operation != "delete":
        given = [c for c in value_columns if c in rows.columns]
        kept = [c for c in value_columns if c not in rows.columns]
        filled = rows
        if kept:
            filled = rows.join(
                current.select(*map(engine.col, [*key_columns, *kept])), key_columns, "left"
            )
        insertions = (
            filled.select(*map(engine.col, [*given, *kept]))
            .withColumn(DML_TYPE, F.lit(1).cast("tinyint"))
            .withColumn(engine.KIND, F.lit(engine.INSERTIONS))
        )
        _refuse_stale_versions(tx, entries, filled.select(*map(engine.col, [*given, *kept])))
        written = marks.unionByName(insertions, allowMissingColumns=True)
    # Evaluate the join once: counting and writing then read the same entries.
    written = written.localCheckpoint(eager=True)
    markers, counts, _ = _write(tx, written, check=tx.refuse_marks_if_insert_only)
    deleted, total = counts
    touched = engine.to_arrow(rows.select(*map(engine.col, key_columns)))
    tx.add_written_files(
        markers,
        inserted=total - deleted,
        deleted=deleted,
        touched_keys=touched,
        read_files=files,
    )
    return total - deleted if operation != "delete" else deleted


def _refuse_stale_versions(tx: Transaction, entries: DataFrame, rows: DataFrame) -> None:
    """The rule of the embedded upsert and update on replacing tables (see
    ``Transaction._refuse_stale_versions``): a new row never ranks below its key's latest
    entry."""
    policy = _replacing_policy(tx.base_state)
    if policy is None or policy.version_column is None:
        return
    stale = _engine().stale_versions(
        entries, rows, tx.key_columns, policy.version_column, policy.latest_order()
    )
    examples = stale.limit(3).collect()
    if examples:
        raise StaleVersionError(
            f"row(s) give {policy.version_column!r} a version below the current version of "
            f"their key (NULL ranks lowest), e.g. {[r.asDict() for r in examples]}; table "
            f"{tx.table.name!r} shows the row with the highest version, so give a version at "
            "or above the current one (insert records an older version without replacing the "
            "newer row)"
        )


def _replacing_policy(state: TableState) -> ReplacingPolicy | None:
    if state.config.policy.get("name") != "replacing":
        return None
    policy = load_policy(state.config.policy, state.schema, state.config)
    return policy if isinstance(policy, ReplacingPolicy) else None


def _latest_order(state: TableState) -> list[str] | None:
    policy = _replacing_policy(state)
    return None if policy is None else policy.latest_order()


# --- merges and rollups --------------------------------------------------------------------------


def merge(
    table: Table,
    partitions: PartitionFilter = None,
    *,
    spark: SparkSession | None = None,
    rows_per_task: int = _ROWS_PER_MERGE_TASK,
    **options: Any,
) -> merging.MergeResult:
    """:meth:`Table.merge` executed on Spark: each partition's entries are spread over tasks by
    key range (every entry of a key in one task), the table's merge policy runs on each range
    and executors write the result; one commit with the same rules as an embedded merge.
    ``options`` are those of :meth:`Table.merge`.

    >>> ledger.spark.merge(events, partitions={"day": "2026-11-20"})           # doctest: +SKIP
    """
    if rows_per_task < 1:
        raise InvalidArgumentError("rows_per_task must be at least 1")
    engine = _engine()
    session = engine.session(spark)

    def rewrite(
        table: Table,
        base: TableState,
        partition: dict[str, str | None],
        inputs: Sequence[FileMarker],
        sql: str,
        what: str,
    ) -> list[FileMarker]:
        schema = file_schema(base.schema, base.config)
        merging.check_query(sql, schema, what)
        entries = engine.scan_files(session, table.store, table.prefix, list(inputs), schema)
        rows = max(1, sum(m.rows for m in inputs))
        row_group_rows, file_rows = merging.file_layout(inputs)
        job = engine.RewriteJob(
            store=table.store,
            table_prefix=table.prefix,
            schema=base.schema,
            config=base.config,
            partition=partition,
            sql=sql,
            file_rows=file_rows,
            row_group_rows=row_group_rows,
        )
        ranges = max(1, math.ceil(rows / rows_per_task))
        with engine.task_errors(what):
            markers: list[FileMarker] = engine.rewrite_entries(
                entries, job, _group_columns(base), ranges
            )
        return markers

    return merging.merge_table(
        table,
        partitions=partitions,
        show_progress=options.pop("progress", None),
        rewrite=rewrite,
        **options,
    )


def _group_columns(state: TableState) -> list[str]:
    """Columns a policy's query never relates entries across: the dedup key, else the key."""
    policy = load_policy(state.config.policy, state.schema, state.config)
    if isinstance(policy, DedupPolicy) and policy.dedup_key:
        return list(policy.dedup_key)
    return list(state.config.key_columns)


def refresh(rollup: Rollup, *, spark: SparkSession | None = None) -> RefreshResult:
    """:meth:`Rollup.refresh` with the group deltas computed on Spark (exactly once, as on the
    embedded engine).

    >>> ledger.spark.refresh(wh.rollup("views_by_page"))                     # doctest: +SKIP
    """
    return rollup.refresh_with(_deltas_on(spark))


def rebuild(rollup: Rollup, *, spark: SparkSession | None = None) -> RefreshResult:
    """:meth:`Rollup.rebuild` with the totals computed on Spark."""
    return rollup.refresh_with(_deltas_on(spark), rebuild=True)


def _deltas_on(spark: SparkSession | None) -> Callable[[DeltaRequest], pa.Table]:
    def deltas(request: DeltaRequest) -> pa.Table:
        engine = _engine()
        F = engine.F
        session = engine.session(spark)
        base = request.rollup.base
        state = request.base_state
        schema = file_schema(state.schema, state.config)
        if request.changes is None:
            entries = engine.scan_files(
                session, base.store, base.prefix, list(state.alive_files), schema
            )
        else:
            found = request.changes
            added = [*found.written, *(m for c in found.replaced for m in c.added)]
            removed = [m for c in found.replaced for m in c.removed]
            entries = engine.signed_entries(
                session, base.store, base.prefix, added, removed, schema
            )
        definition = request.rollup.definition
        dml = engine.col(DML_TYPE)
        weighted = []
        for measure in definition.measures:
            if measure.function == "count" and measure.column is None:
                value = dml
            elif measure.function == "count":
                value = F.when(engine.col(measure.column or "").isNull(), 0).otherwise(dml)
            else:
                value = dml * engine.col(measure.column or "")
            weighted.append(value.alias(measure.name))
        by = list(definition.by)
        parts = [entries.select(*map(engine.col, by), *weighted)]
        if request.rebuild:
            table = request.rollup.table
            held_schema = file_schema(request.rollup_state.schema, request.rollup_state.config)
            held = engine.scan_files(
                session,
                table.store,
                table.prefix,
                list(request.rollup_state.alive_files),
                held_schema,
            )
            parts.append(
                held.select(
                    *map(engine.col, by),
                    *((-(dml * engine.col(m.name))).alias(m.name) for m in definition.measures),
                )
            )
        union = parts[0]
        for part in parts[1:]:
            union = union.unionByName(part)
        types = request.rollup_state.schema
        target = engine.spark_schema(types.arrow())
        summed = union.groupBy(*map(engine.col, by)).agg(
            *(
                F.coalesce(F.sum(engine.col(m.name)), F.lit(0))
                .cast(target[m.name].dataType)
                .alias(m.name)
                for m in definition.measures
            )
        )
        changed = None
        for m in definition.measures:
            term = engine.col(m.name) != 0
            changed = term if changed is None else changed | term
        out: pa.Table = engine.to_arrow(summed.filter(changed))
        return out

    return deltas


# --- streaming -----------------------------------------------------------------------------------

_STREAM_OPERATIONS = {"insert": "insert", "upsert": "upsert", "append_entries": "entries"}


def stream_sink(
    table: Table, *, operation: str = "insert", evolve_schema: bool = False
) -> Callable[[DataFrame, int], None]:
    """A ``foreachBatch`` function that writes each micro-batch into ``table`` exactly once:
    the commit carries the streaming query's id and the batch id as its idempotency key, so a
    query restarted from its checkpoint skips the batches already committed.

    >>> (stream.writeStream.foreachBatch(ledger.spark.stream_sink(events))
    ...     .option("checkpointLocation", "/chk/events").start())            # doctest: +SKIP
    """
    if operation not in _STREAM_OPERATIONS:
        raise InvalidArgumentError(
            f"operation must be one of {sorted(_STREAM_OPERATIONS)}, not {operation!r}"
        )
    if not isinstance(table, Table):
        raise InvalidArgumentError(f"stream into a Table, not {type(table).__name__}")

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        query = _engine().streaming_query_id(batch)
        if query is None:
            raise InvalidArgumentError(
                "stream_sink is a foreachBatch function of a streaming query; for a batch "
                "DataFrame use ledger.spark.insert"
            )
        tx = Transaction(
            table, app_id=f"stream:{query}", batch=int(batch_id), evolve_schema=evolve_schema
        )
        try:
            if operation == "upsert":
                _read_modify_write(tx, batch, "upsert")
            else:
                _insert(tx, batch, _STREAM_OPERATIONS[operation])
            tx.commit()
        except BaseException:
            tx.abort()
            raise

    return write_batch


def committed_batch(table: Table, query_id: str) -> int | None:
    """The last micro-batch of streaming query ``query_id`` committed into ``table``."""
    batch = table.handle.latest_state().apps.get(f"stream:{query_id}")
    return None if batch is None else int(batch)


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


# --- Delta Lake publishing -----------------------------------------------------------------------


def publish_delta(source: Table | Rollup, target: str, *, spark: SparkSession | None = None) -> Any:
    """Publish a table's visible rows (or a rollup's totals) into the Delta table at
    ``target`` through delta-spark, incrementally and exactly once, as
    ``views.publish_delta`` does from the embedded engine (same plan, same checks, same
    recorded version: either writer can continue the other's publishes). Needs the Delta Lake
    jars on the Spark classpath (``make jars``; see ``ledger.jvm``). The result's row counts
    are the plan's (keys replaced, rows written), not Delta's merge metrics.

    >>> ledger.spark.publish_delta(wh.table("customers"), "/lake/customers")  # doctest: +SKIP
    """
    from views.publish import PublishResult, target_plan

    engine = _engine()
    session = engine.session(spark)
    if not engine.delta_available(session):
        engine.delta_publish(session, target, None)  # raises the error naming what is missing
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
    delta_version = engine.delta_publish(session, target, plan)
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
