"""Structured Streaming into a ledger table: a ``foreachBatch`` function committing each
micro-batch exactly once (the streaming query's id and the batch id are the commit's
idempotency key)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame

from ledger.engines.spark.rmw import read_modify_write
from ledger.engines.spark.write import insert
from ledger.errors import InvalidArgumentError
from ledger.table import Table
from ledger.transaction import Transaction

# stream_sink's operations -> what the write does (rows to insert, upsert, or entries).
OPERATIONS = {"insert": "insert", "upsert": "upsert", "append_entries": "entries"}


def app_id(query_id: str) -> str:
    """The application id a streaming query's commits carry."""
    return f"stream:{query_id}"


def streaming_query_id(batch: DataFrame) -> str | None:
    """The id of the streaming query a ``foreachBatch`` micro-batch belongs to (stable across
    restarts from the same checkpoint), or None outside a stream."""
    context: Any = batch.sparkSession.sparkContext
    value = context.getLocalProperty("sql.streaming.queryId")
    return None if value is None else str(value)


def batch_writer(
    table: Table, operation: str, evolve_schema: bool
) -> Callable[[DataFrame, int], None]:
    """The ``foreachBatch`` function of ``ledger.spark.stream_sink``."""
    if operation not in OPERATIONS:
        raise InvalidArgumentError(
            f"operation must be one of {sorted(OPERATIONS)}, not {operation!r}"
        )
    if not isinstance(table, Table):
        raise InvalidArgumentError(f"stream into a Table, not {type(table).__name__}")

    def write_batch(batch: DataFrame, batch_id: int) -> None:
        query = streaming_query_id(batch)
        if query is None:
            raise InvalidArgumentError(
                "stream_sink is a foreachBatch function of a streaming query; for a batch "
                "DataFrame use ledger.spark.insert"
            )
        tx = Transaction(
            table, app_id=app_id(query), batch=int(batch_id), evolve_schema=evolve_schema
        )
        try:
            if operation == "upsert":
                read_modify_write(tx, batch, "upsert")
            else:
                insert(tx, batch, OPERATIONS[operation])
            tx.commit()
        except BaseException:
            tx.abort()
            raise

    return write_batch


def committed_batch(table: Table, query_id: str) -> int | None:
    """The last micro-batch of streaming query ``query_id`` committed into ``table``."""
    batch = table.snapshot().state.apps.get(app_id(query_id))
    return None if batch is None else int(batch)
