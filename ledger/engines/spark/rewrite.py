"""Merges on Spark: a partition's entries are shuffled by key range and the table's merge
policy runs on each range inside ``mapInArrow`` (the policy's own query, on an in-process DuckDB),
so every policy means exactly what it means on one machine; executors write the result.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator, Sequence
from contextlib import closing
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ledger.engines.base import RewriteJob, WriteTarget
from ledger.engines.duckdb import session as embedded
from ledger.engines.spark.convert import col
from ledger.engines.spark.errors import task_errors
from ledger.engines.spark.scan import scan_files
from ledger.engines.spark.session import arrow_batches, map_in_arrow
from ledger.log.entries import FileMarker
from ledger.log.state import TableState
from ledger.maintenance import merge as merging
from ledger.schema import DML_TYPE
from ledger.sql import ident
from ledger.sql.names import ENTRIES
from ledger.writer import SortedFileSink, sort_columns
from merge_policies import load_policy

if TYPE_CHECKING:
    from ledger.table import Table

ROWS_PER_TASK = 4 * 1024 * 1024  # entries a merge task rewrites at most, by default


def merge(
    session: SparkSession,
    table: Table,
    partitions: Any,
    rows_per_task: int,
    **options: Any,
) -> merging.MergeResult:
    """:meth:`Table.merge` with each partition's rewrite run on Spark, ``rows_per_task``
    entries per task at most (see ``ledger.spark.merge``)."""

    def rewrite(
        table: Table,
        base: TableState,
        partition: dict[str, str | None],
        inputs: Sequence[FileMarker],
        sql: str,
        what: str,
    ) -> list[FileMarker]:
        target = WriteTarget(table.store, table.prefix, base.schema, base.config)
        row_group_rows, file_rows = merging.file_layout(inputs)
        job = RewriteJob(
            target=target,
            partition=partition,
            files=tuple(inputs),
            sql=sql,
            group_columns=tuple(group_columns(base)),
            file_rows=file_rows,
            row_group_rows=row_group_rows,
            what=what,
        )
        return rewrite_files(session, job, rows_per_task)

    return merging.merge_table(
        table,
        partitions=partitions,
        show_progress=options.pop("progress", None),
        rewrite=rewrite,
        **options,
    )


def group_columns(state: TableState) -> list[str]:
    """Columns a policy's query never relates entries across: the key, or, where entries of
    different keys can repeat each other, the columns that make two entries repeats."""
    keys = tuple(state.config.key_columns)
    policy = load_policy(state.config.policy, state.schema, state.config)
    repeats = None if policy.keys_independent else policy.repeat_columns(keys)
    if repeats is None:
        return list(keys)
    return [c for c in repeats if c != DML_TYPE]


def rewrite_files(
    session: SparkSession, job: RewriteJob, rows_per_task: int = ROWS_PER_TASK
) -> list[FileMarker]:
    """Run ``job`` on the executors: its files' entries spread over tasks by ranges of its
    group columns (every entry of a group in one task, ``rows_per_task`` entries per task at
    most), its query run on each range, each result written sorted; returns the markers."""
    target = job.target
    # Checked on the driver (bound over no rows) before any task runs: a wrong query then
    # fails as a ledger error naming it, not as a task failure.
    merging.check_query(job.sql, target.file_schema(), job.what)
    entries = scan_files(
        session, target.store, target.table_prefix, list(job.files), target.file_schema()
    )
    ranges = max(1, math.ceil(max(1, sum(m.rows for m in job.files)) / rows_per_task))
    with task_errors(job.what):
        return rewrite_entries(entries, job, ranges)


def rewrite_entries(entries: DataFrame, job: RewriteJob, ranges: int) -> list[FileMarker]:
    """Run ``job.sql`` (DuckDB SQL over ``entries``) on each of ``ranges`` ranges of
    ``job.group_columns`` of ``entries`` (every entry of one group in one range), write each
    result sorted; return the markers."""
    spread = entries.repartitionByRange(ranges, *map(col, job.group_columns))
    with arrow_batches(entries.sparkSession):
        written = map_in_arrow(
            spread, lambda batches: _rewrite_task(job, batches), "marker string"
        ).collect()
    return [FileMarker.from_json(json.loads(row["marker"])) for row in written]


def _rewrite_task(job: RewriteJob, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    target = job.target
    pending = [b for b in batches if b.num_rows]
    if not pending:
        return
    entries = pa.Table.from_batches(pending).cast(target.file_schema())
    sink = SortedFileSink(
        target.writer(), job.partition, file_rows=job.file_rows, row_group_rows=job.row_group_rows
    )
    order = ", ".join(f"{ident(c)} ASC NULLS LAST" for c in sort_columns(target.config))
    try:
        with closing(embedded.connect()) as con:
            con.register(ENTRIES, entries)
            reader = con.sql(f"SELECT * FROM ({job.sql}) ORDER BY {order}").to_arrow_reader(
                128 * 1024
            )
            for batch in reader:
                sink.write(batch)
        markers = sink.close()
    except BaseException:
        sink.abort()
        for key in sink.keys:
            target.store.delete(key)
        raise
    yield pa.RecordBatch.from_pydict(
        {"marker": [json.dumps(m.to_json()) for m in markers]}, pa.schema([("marker", pa.string())])
    )
