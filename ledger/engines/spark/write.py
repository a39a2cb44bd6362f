"""Entries -> files written by the executors, committed by the driver.

The shared writer (``ledger.writer``) runs inside ``mapInArrow``: executors write the Parquet
files themselves and send back only their file markers. The driver counts each Spark partition's
rows first, so it can claim every ``trx_seq`` and generated row id before any task writes.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pyspark import TaskContext
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from ledger import errors
from ledger.engines.base import WriteTarget
from ledger.engines.spark.convert import checked_frame, col, conformed_columns, transformed
from ledger.engines.spark.errors import task_errors
from ledger.engines.spark.session import arrow_batches, map_in_arrow, to_arrow
from ledger.errors import InvalidArgumentError, MissingKeyError, SchemaError, TypeMismatchError
from ledger.log.entries import FileMarker, TableConfig
from ledger.partitioning import PartitionSpec
from ledger.schema import DML_TYPE, ROW_ID, TableSchema, conform
from ledger.sql.names import KIND
from ledger.storage import Store
from ledger.writer import DataWriter, build_entries, file_schema, row_ids

if TYPE_CHECKING:
    from ledger.transaction import Transaction

MARKS, INSERTIONS = 0, 1  # values of KIND: an entry's ordering class in one write
OTHER_ROWS = "a Spark partition of the DataFrame gave other rows"  # the write's own check
_TASK_ROWS = 4 * 1024 * 1024  # rows an executor sorts and writes at once


def insert(tx: Transaction, data: DataFrame, mode: str) -> int:
    """Write ``data`` in ``tx``: rows to insert (``mode`` ``insert``) or entries carrying their
    own ``dml_type`` (``entries``); returns the number of entries written."""
    frame = checked_frame(data)
    if tx.begin_operation("insert" if mode == "insert" else "append_entries"):
        return 0
    if mode == "entries":
        if DML_TYPE not in frame.columns:
            raise SchemaError("append_entries needs a dml_type column (+1 insert, -1 mark)")
        _refuse_non_numeric_signs(dict(frame.dtypes)[DML_TYPE])
        signs = frame.agg(
            F.sum(
                F.when(~col(DML_TYPE).isin(1, -1) | col(DML_TYPE).isNull(), 1).otherwise(0)
            ).alias("bad"),
            F.sum(F.when(col(DML_TYPE) == -1, 1).otherwise(0)).alias("marks"),
            F.sum(
                F.when(
                    (col(DML_TYPE) == -1)
                    & (col(ROW_ID).isNull() if ROW_ID in frame.columns else F.lit(True)),
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
        frame = transformed(tx, frame, inserted=True)
    rows = conformed_columns(tx, frame, require_keys=True)
    if mode == "entries" and signs["marks"]:
        _check_delete_marks(tx, rows)
    if DML_TYPE not in rows.columns:
        rows = rows.withColumn(DML_TYPE, F.lit(1).cast("tinyint"))
    rows = rows.withColumn(KIND, F.lit(INSERTIONS))
    markers, (_, written), rows = write(tx, rows)
    deleted = 0
    touched = None
    if mode == "entries":
        marks = rows.filter(col(DML_TYPE) == -1)
        touched = to_arrow(marks.select(*map(col, tx.key_columns)))
        deleted = touched.num_rows
    tx.add_written_files(markers, inserted=written - deleted, deleted=deleted, touched_keys=touched)
    return written


_NUMBER_TYPES = ("tinyint", "smallint", "int", "bigint", "float", "double", "decimal", "void")


def _refuse_non_numeric_signs(spark_type: str) -> None:
    """Raise TypeMismatchError unless ``dml_type`` holds numbers: Spark would compare ``true``
    or ``'-1'`` with 1 and -1 after casting them, and read them as signs."""
    if not spark_type.startswith(_NUMBER_TYPES):
        raise TypeMismatchError(
            f"dml_type must be the number +1 or -1 in every row, never NULL; got values of type "
            f"{spark_type} (give the integers 1 and -1, not booleans or text)"
        )


def _check_delete_marks(tx: Transaction, rows: DataFrame) -> None:
    """The embedded engine's rule for hand-written marks, on the entries of the marked keys
    (brought to the driver: corrections are few), before any file is written."""
    keys = list(tx.key_columns)
    marked = rows.filter(col(DML_TYPE) == -1).select(*map(col, keys)).distinct()
    tx.check_delete_marks(to_arrow(rows.join(marked, on=keys, how="left_semi")))


def write(
    tx: Transaction, entries: DataFrame, check: Callable[[int], None] | None = None
) -> tuple[list[FileMarker], tuple[int, int], DataFrame]:
    """Write an entries DataFrame (see :class:`WriteJob`) for ``tx``: count
    per Spark partition, claim ``trx_seq`` ranges (marks first), write on the executors.
    ``check(marks)`` runs after counting, before any file is written. Returns the markers, the
    numbers of marks and of all entries written, and the DataFrame the entries were written from.

    The counting job and the write job must see the same partitions. A DataFrame that yields
    other rows when evaluated again, or whose partitions Spark plans otherwise for the write
    (adaptive execution sizes a shuffle's partitions by the columns it carries), fails the
    write's own check; it is then checkpointed and counted and written once more. The first
    attempt's files are left to vacuum as orphans; nothing of it is committed."""
    for attempt in range(2):
        try:
            markers, counts = _write_once(tx, entries, check)
            return markers, counts, entries
        except InvalidArgumentError as e:
            if attempt or OTHER_ROWS not in str(e):
                raise
            entries = entries.localCheckpoint(eager=True)
    raise AssertionError("unreachable")


def _write_once(
    tx: Transaction, entries: DataFrame, check: Callable[[int], None] | None
) -> tuple[list[FileMarker], tuple[int, int]]:
    config = tx.config
    keys = () if config.generated_row_id else config.key_columns
    counts = count_partitions(entries, keys, config.generated_row_id)
    if counts.null_keys:
        raise MissingKeyError(
            f"primary-key column(s) {list(keys)} hold NULL in {counts.null_keys} row(s); every "
            "row needs a complete key"
        )
    total = sum(counts.rows.values())
    marks = sum(n for (_, kind), n in counts.rows.items() if kind == MARKS)
    if check is not None:
        check(marks)
    if not total:
        return [], (0, 0)
    first_seq: dict[tuple[int, int], int] = {}
    for kind in (MARKS, INSERTIONS):
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
    job = WriteJob(
        store=tx.table.store,
        table_prefix=tx.table.prefix,
        schema=tx.schema,
        config=config,
        trx_id=tx.trx_id,
        first_seq=first_seq,
        first_row=first_row,
        expected=counts.rows,
    )
    with task_errors(f"writing {tx.table.name!r}"):
        markers: list[FileMarker] = write_entries(entries, job)
    return markers, (marks, total)


@dataclass(frozen=True)
class WriteJob:
    """What an executor needs to turn rows into entry files of one transaction.

    The DataFrame written holds user columns (some may be missing), maybe ``_row_id``, and
    ``dml_type`` and :data:`KIND` columns. ``first_seq[(partition, kind)]`` and
    ``first_row[partition]`` are where that Spark partition's ``trx_seq`` numbers and generated
    row ids start; ``expected`` its row counts per kind (a DataFrame that changes between the
    counting pass and the write is refused)."""

    store: Store
    table_prefix: str
    schema: TableSchema
    config: TableConfig
    trx_id: int
    first_seq: dict[tuple[int, int], int]
    first_row: dict[int, int]
    expected: dict[tuple[int, int], int]


@dataclass(frozen=True)
class PartitionCounts:
    """Per Spark partition and kind, the rows to write; and rows needing a generated row id."""

    rows: dict[tuple[int, int], int]
    new_row_ids: dict[int, int]
    null_keys: int


def count_partitions(
    df: DataFrame, key_columns: Sequence[str], needs_row_ids: bool
) -> PartitionCounts:
    """One pass over ``df``: rows per Spark partition and kind, rows that need a generated row
    id, and rows with a NULL key (refused before any file is written).

    Each row is reduced to a code (its kind, whether a key is NULL, whether it lacks a
    ``_row_id``), counted per ``spark_partition_id()`` in the JVM. Over a local relation
    (data created on the driver) Spark folds that function on the driver, where every row is in
    partition 0, so there the codes are counted in ``mapInArrow``, like the write that follows.
    Either way the write checks that each of its tasks got the rows counted here."""
    code = col(KIND).cast("int")
    if key_columns:
        null = F.lit(False)
        for k in key_columns:
            null = null | col(k).isNull()
        code = code + F.when(null, 2).otherwise(0)
    if needs_row_ids:
        absent = col(ROW_ID).isNull() if ROW_ID in df.columns else F.lit(True)
        code = code + F.when(absent, 4).otherwise(0)
    seen: dict[int, np.ndarray] = {}
    if _local_relation(df):
        for r in _count_codes_in_python(df.select(code.cast("tinyint").alias("c"))):
            seen.setdefault(int(r["p"]), np.zeros(8, dtype=np.int64))[int(r["c"])] += r["n"]
    else:
        counted = (
            df.select(F.spark_partition_id().alias("p"), code.alias("c"))
            .groupBy("p", "c")
            .count()
            .collect()
        )
        for r in counted:
            seen.setdefault(int(r["p"]), np.zeros(8, dtype=np.int64))[int(r["c"])] += r["count"]
    codes = np.arange(8)
    rows: dict[tuple[int, int], int] = {}
    ids: dict[int, int] = {}
    nulls = 0
    for partition, n in seen.items():
        for kind in (MARKS, INSERTIONS):
            if count := int(n[codes & 1 == kind].sum()):
                rows[(partition, kind)] = count
        if count := int(n[(codes & 4 != 0) & (codes & 1 == INSERTIONS)].sum()):
            ids[partition] = count
        nulls += int(n[codes & 2 != 0].sum())
    return PartitionCounts(rows, ids, nulls)


def _local_relation(df: DataFrame) -> bool:
    """Whether ``df``'s optimized plan reads a local relation (rows held by the driver); True
    where the plan cannot be inspected (the Python count is right everywhere)."""
    jdf = getattr(df, "_jdf", None)
    if jdf is None:
        return True
    leaves = jdf.queryExecution().optimizedPlan().collectLeaves()
    return any(
        leaves.apply(i).getClass().getSimpleName() == "LocalRelation" for i in range(leaves.size())
    )


def _count_codes_in_python(codes: DataFrame) -> list[Any]:
    def count(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        context = TaskContext.get()
        partition = context.partitionId() if context is not None else 0
        seen = np.zeros(8, dtype=np.int64)
        for batch in batches:
            seen += np.bincount(batch.column(0).to_numpy(zero_copy_only=False), minlength=8)
        found = np.nonzero(seen)[0]
        yield pa.RecordBatch.from_pydict(
            {"p": [partition] * len(found), "c": found.tolist(), "n": seen[found].tolist()}
        )

    with arrow_batches(codes.sparkSession, 1024 * 1024):  # one byte per row
        found: list[Any] = codes.mapInArrow(count, "p long, c long, n long").collect()
    return found


def write_entries(df: DataFrame, job: WriteJob) -> list[FileMarker]:
    """Write ``df`` (see :class:`WriteJob`) as entry files from the executors; return the
    markers of every file written."""
    with arrow_batches(df.sparkSession):
        written = map_in_arrow(
            df, lambda batches: _write_task(job, batches), "marker string"
        ).collect()
    return [FileMarker.from_json(json.loads(row["marker"])) for row in written]


def _write_task(job: WriteJob, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    context = TaskContext.get()
    partition = context.partitionId() if context is not None else 0
    writer = DataWriter(
        job.store,
        job.table_prefix,
        job.schema,
        job.config,
        PartitionSpec.parse(list(job.config.partition_by), job.schema),
    )
    target = file_schema(job.schema, job.config)
    done = {MARKS: 0, INSERTIONS: 0}
    new_rows = 0
    markers: list[FileMarker] = []
    try:
        for chunk in _chunks(batches, _TASK_ROWS):
            entries, new_ids = _chunk_entries(job, target, partition, chunk, done, new_rows)
            new_rows += new_ids
            markers += writer.write(entries)
        for kind, count in done.items():
            if count != job.expected.get((partition, kind), 0):
                raise errors.InvalidArgumentError(
                    f"{OTHER_ROWS} than when its rows were counted (it is not deterministic, or "
                    "Spark planned its partitions otherwise); cache or checkpoint it before "
                    "writing it to a ledger table"
                )
    except BaseException:
        for marker in markers:
            job.store.delete(job.table_prefix + marker.path)
        raise
    yield pa.RecordBatch.from_pydict(
        {"marker": [json.dumps(m.to_json()) for m in markers]}, pa.schema([("marker", pa.string())])
    )


def _chunks(batches: Iterator[pa.RecordBatch], rows: int) -> Iterator[pa.Table]:
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if not batch.num_rows:
            continue
        pending.append(batch)
        count += batch.num_rows
        if count >= rows:
            yield pa.Table.from_batches(pending)
            pending, count = [], 0
    if pending:
        yield pa.Table.from_batches(pending)


def _chunk_entries(
    job: WriteJob,
    target: pa.Schema,
    partition: int,
    chunk: pa.Table,
    done: dict[int, int],
    new_rows: int,
) -> tuple[pa.Table, int]:
    kinds = chunk.column(KIND).to_numpy()
    seq = np.zeros(chunk.num_rows, dtype=np.int64)
    for kind in (MARKS, INSERTIONS):
        mine = kinds == kind
        start = job.first_seq.get((partition, kind), 0) + done[kind]
        seq[mine] = start + np.arange(int(mine.sum()))
        done[kind] += int(mine.sum())
    signs = chunk.column(DML_TYPE).cast(pa.int8())
    row_id_column = None
    if job.config.generated_row_id:
        if ROW_ID in chunk.column_names:
            given = chunk.column(ROW_ID).combine_chunks().cast(pa.int64())
        else:
            given = pa.nulls(chunk.num_rows, pa.int64())
        missing = pc.is_null(given).to_numpy(zero_copy_only=False)
        is_mark = pc.equal(signs, -1).to_numpy(zero_copy_only=False)
        if (missing & is_mark).any():
            raise errors.MissingKeyError(
                "delete marks on a table without a primary key must carry the _row_id of the "
                "entry they cancel"
            )
        wanted = missing & ~is_mark
        count = int(wanted.sum())
        ids = row_ids(job.trx_id, job.first_row.get(partition, 0) + new_rows, count)
        filled = np.asarray(given.fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64)
        filled = filled.copy()
        filled[wanted] = ids.to_numpy()
        row_id_column = pa.array(filled, pa.int64())
        new_rows = count
    else:
        new_rows = 0
    user = chunk.drop_columns([c for c in (KIND, DML_TYPE, ROW_ID) if c in chunk.column_names])
    keys = () if job.config.generated_row_id else job.config.key_columns
    rows, _ = conform(user, job.schema, key_columns=keys, require_all_keys=True)
    if row_id_column is not None:
        rows = rows.append_column(ROW_ID, row_id_column)
    entries = build_entries(
        rows,
        target,
        trx_id=job.trx_id,
        trx_seq=pa.array(seq.astype(np.int32)),
        dml_type=signs,
        new_row_ids=lambda n: pa.nulls(n, pa.int64()),
    )
    return entries, new_rows


def write_numbered(entries: DataFrame, target: WriteTarget) -> list[FileMarker]:
    """Write ``entries`` (numbered entry rows of the target's file schema: every system
    column already set) as sorted files from the executors; return the markers of every file
    written. Nothing is committed; a failing task deletes the files it wrote."""
    with arrow_batches(entries.sparkSession):
        written = map_in_arrow(
            entries, lambda batches: _write_numbered_task(target, batches), "marker string"
        ).collect()
    return [FileMarker.from_json(json.loads(row["marker"])) for row in written]


def _write_numbered_task(
    target: WriteTarget, batches: Iterator[pa.RecordBatch]
) -> Iterator[pa.RecordBatch]:
    writer = target.writer()
    markers: list[FileMarker] = []
    try:
        for chunk in _chunks(batches, _TASK_ROWS):
            markers += writer.write(chunk)
    except BaseException:
        for marker in markers:
            target.store.delete(target.table_prefix + marker.path)
        raise
    yield pa.RecordBatch.from_pydict(
        {"marker": [json.dumps(m.to_json()) for m in markers]}, pa.schema([("marker", pa.string())])
    )
