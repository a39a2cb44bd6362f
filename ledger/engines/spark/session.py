"""The Spark session the engine runs in, and the Arrow batch size of its Python tasks."""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession

from ledger.engines.spark import jars

__all__ = ["ARROW_BATCH_ROWS", "DataFrame", "SparkSession", "arrow_batches", "session", "to_arrow"]


def session(spark: SparkSession | None = None) -> SparkSession:
    """``spark``, else the active session, else a new local one that binds to 127.0.0.1, runs
    workers on this interpreter and computes in UTC.

    >>> spark = session()                                                   # doctest: +SKIP
    """
    if spark is not None:
        return spark
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    # The active session is per thread: from another thread, take the process's running
    # session as it is (a builder with options would re-apply them to it).
    running: SparkSession | None = getattr(SparkSession, "_instantiatedSession", None)
    if running is not None and not _stopped(running):
        return running
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    builder: Any = SparkSession.builder
    # The jars `make jars` (and `make jars-s3a`) fetched; a group not fetched is left out.
    for name, value in jars.spark_options(["delta", "s3a"]).items():
        builder = builder.config(name, value)
    started: SparkSession = (
        builder.master(f"local[{os.cpu_count() or 2}]")
        .appName("ledger-tables")
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.sql.session.timeZone", "UTC")
        .config("spark.sql.shuffle.partitions", str(2 * (os.cpu_count() or 2)))
        .getOrCreate()
    )
    return started


def _stopped(spark: SparkSession) -> bool:
    context = spark.sparkContext
    return context._jsc is None or bool(context._jsc.sc().isStopped())


ARROW_BATCH_ROWS = 128 * 1024  # rows per Arrow batch handed to the writers' Python tasks
_ARROW_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"


_ARROW_BATCH_LOCK = threading.Lock()
_ARROW_BATCH_SAVED: dict[int, tuple[str | None, int]] = {}  # id(session) -> (its value, users)


def _batch_rows(value: str | None) -> int:
    try:
        return int(value) if value is not None else 0
    except ValueError:
        return 0


ArrowTask = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


def map_in_arrow(df: DataFrame, task: ArrowTask, schema: Any) -> DataFrame:
    """``df.mapInArrow(task, schema)`` for any column names. PySpark resolves each input
    column by its name there, which fails on a name holding a dot or a backtick; the columns
    cross under positional names and ``task`` gets its batches under the original ones."""
    names = list(df.columns)
    positional = df.toDF(*(f"_{i}" for i in range(len(names))))

    def renamed(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        return task(batch.rename_columns(names) for batch in batches)

    return positional.mapInArrow(renamed, schema)


@contextmanager
def arrow_batches(spark: SparkSession, rows: int = ARROW_BATCH_ROWS) -> Iterator[None]:
    """Run the block's jobs with Arrow batches of at least ``rows`` rows going to ``mapInArrow``
    tasks. Spark's default (10,000) makes the writers spend a third of their time on batch
    overhead. A larger setting of the session's own (or none: 0) is kept. The session's value
    is put back when the last block using that session ends, so writes from several threads
    never leave it changed."""
    session = id(spark)
    with _ARROW_BATCH_LOCK:
        saved, users = _ARROW_BATCH_SAVED.get(session, (spark.conf.get(_ARROW_BATCH), 0))
        _ARROW_BATCH_SAVED[session] = (saved, users + 1)
        now = _batch_rows(spark.conf.get(_ARROW_BATCH))
        if 0 < now < rows:
            spark.conf.set(_ARROW_BATCH, str(rows))
    try:
        yield
    finally:
        with _ARROW_BATCH_LOCK:
            saved, users = _ARROW_BATCH_SAVED.pop(session)
            if users > 1:
                _ARROW_BATCH_SAVED[session] = (saved, users - 1)
            elif saved is not None:
                spark.conf.set(_ARROW_BATCH, saved)


def to_arrow(df: DataFrame) -> pa.Table:
    """Collect a (small) DataFrame to the driver as Arrow."""
    table: pa.Table = df.toArrow()
    return table
