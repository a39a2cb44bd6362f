"""The Spark engine (PySpark): sessions, raw-ledger DataFrames, and entries written by executors.

The only module besides its DuckDB twin that imports an engine: the rest of the project talks to
Spark through these functions (see ``ledger.spark`` for the public API).

- Reads build a DataFrame from the log's file list (never a directory listing) with the schema
  from the log. Files Spark's own filesystem can read (local disk, or S3 where the Hadoop S3
  connector is on the classpath) are read by Spark's Parquet reader; others are read with
  pyarrow inside ``mapInArrow``.
- Writes run the shared writer (``ledger.writer``) inside ``mapInArrow``: executors write the
  Parquet files themselves and send back only their file markers.
- Merges shuffle a partition's entries by key range and run the table's merge policy on each
  range inside ``mapInArrow`` (the policy's own query, on an in-process DuckDB), so every policy
  means exactly what it means on one machine.
"""

from __future__ import annotations

import json
import os
import re
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ledger import errors, jvm
from ledger.engines import s3a
from ledger.errors import InvalidArgumentError, MissingDependencyError, StorageError
from ledger.log.entries import FileMarker, TableConfig
from ledger.partitioning import PartitionSpec
from ledger.schema import (
    DML_TYPE,
    ROW_ID,
    TRX_ID,
    TRX_SEQ,
    TableSchema,
    check_data_names,
    conform,
    parse_text,
)
from ledger.storage import Store
from ledger.storage.s3 import S3Store
from ledger.writer import (
    DataWriter,
    SortedFileSink,
    build_entries,
    file_schema,
    row_ids,
    sort_columns,
)

try:
    from pyspark import TaskContext
    from pyspark.errors import PythonException
    from pyspark.sql import Column, DataFrame, SparkSession, Window
    from pyspark.sql import functions as F
    from pyspark.sql import types as T
    from pyspark.sql.pandas.functions import arrow_udf
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema, to_arrow_type
except ImportError as e:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError(
        "the Spark engine needs PySpark: pip install 'ledger-tables[spark]'"
    ) from e

__all__ = ["DataFrame", "SparkSession"]

KIND = "__ledger_kind"  # ordering class of an entry in one write: marks (0) before insertions (1)
MARKS, INSERTIONS = 0, 1
OTHER_ROWS = "a Spark partition of the DataFrame gave other rows"  # the write's own check
_NET = "__ledger_net"
_ORDER = "__ledger_order"
_TASK_ROWS = 4 * 1024 * 1024  # rows an executor sorts and writes at once
_SAFE_PATH = re.compile(r"[A-Za-z0-9_./=+-]+")
_TASK_ERROR = re.compile(r"ledger\.errors\.(\w+): ([^\n]*)")


# --- sessions ------------------------------------------------------------------------------------


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
    for name, value in jvm.spark_options(["delta", "s3a"]).items():
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


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of an Arrow schema (TIMESTAMP without a zone is TIMESTAMP_NTZ)."""
    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The Arrow schema a DataFrame's rows arrive in at executors."""
    return to_arrow_schema(df.schema, timezone="UTC")


@contextmanager
def task_errors(what: str) -> Iterator[None]:
    """Re-raise a ledger error an executor raised as itself (Spark wraps it in text), and a
    failure to read or write data as :class:`StorageError`."""
    try:
        yield
    except PythonException as e:
        raise _unwrapped(e, what) from e
    except Exception as e:
        if type(e).__name__ == "Py4JJavaError" and "PythonException" in str(e):
            raise _unwrapped(e, what) from e
        raise


def _unwrapped(e: Exception, what: str) -> Exception:
    found = _TASK_ERROR.findall(str(e))
    for name, message in reversed(found):
        kind = getattr(errors, name, None)
        if isinstance(kind, type) and issubclass(kind, errors.LedgerError):
            return kind(message)
    if "OSError" in str(e) or "IOError" in str(e) or "FileNotFoundError" in str(e):
        return StorageError(f"{what}: an executor could not read or write data: {e}")
    return e


# --- insert transforms ---------------------------------------------------------------------------


def insert_transformed(df: DataFrame, sql: str) -> DataFrame:
    """``df`` as the table's insert transform shapes it: the very query the embedded engine
    runs (on an in-process DuckDB, over each Arrow batch, inside ``mapInArrow``), so a transform
    means the same on both engines; Spark SQL would give some functions and casts other
    meanings. A transform works row by row (``ledger.insert_transform``), so batches can be cut
    anywhere. The result is evaluated once here: a transform that fails on the data raises
    :class:`~ledger.errors.InsertTransformError` before anything is written."""
    from ledger import insert_transform

    output = insert_transform.apply(sql, arrow_schema(df).empty_table()).schema
    check_data_names(output.names)
    try:
        target = spark_schema(output)
    except (TypeError, ValueError) as e:
        raise errors.InsertTransformError(
            f"insert transform {sql!r} returns {output}, which Spark cannot hold ({e}); cast "
            "its output to the table's column types"
        ) from e

    def shape(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            result = insert_transform.apply(sql, pa.Table.from_batches([batch]))
            yield from result.cast(output).to_batches()

    with task_errors("running the insert transform"):
        shaped: DataFrame = df.mapInArrow(shape, target).localCheckpoint(eager=True)
    return shaped


# --- reads ---------------------------------------------------------------------------------------


def scan_files(
    spark: SparkSession,
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    *,
    reader: str = "auto",
) -> DataFrame:
    """The raw entries of ``files`` as a DataFrame with exactly ``schema`` (columns missing from
    older files read as NULL). ``reader``: ``auto``, ``spark`` (Spark's Parquet reader), ``s3a``
    (Spark's Parquet reader through Hadoop's S3A connector: an S3 store only) or ``pyarrow``
    (executors read the files through the store's pyarrow filesystem)."""
    if reader == "s3a" and not isinstance(store, S3Store):
        raise InvalidArgumentError(
            f"reader='s3a' reads S3 stores only, and {store.uri!r} is not one; use 'auto'"
        )
    struct = spark_schema(schema)
    if not files:
        return spark.createDataFrame([], struct)
    keys = [table_prefix + f.path for f in files]
    paths = None if reader == "pyarrow" else native_paths(spark, store, keys)
    if paths is None:
        if reader in ("spark", "s3a"):
            raise StorageError(_no_native_reader(spark, store))
        return _pyarrow_scan(spark, store, keys, schema)
    # Partition values live in the log, never in paths Spark would parse (basePath = the file).
    frame = spark.read.schema(struct).option("mergeSchema", "false").parquet(*paths)
    return frame.select(*(F.col(_quoted(f.name)).cast(struct[f.name].dataType) for f in schema))


def native_paths(spark: SparkSession, store: Store, keys: Sequence[str]) -> list[str] | None:
    """Paths Spark's own filesystem reads ``keys`` at, or None when it cannot (a scheme without
    a Hadoop connector, or names Hadoop would misparse)."""
    local = [store.local_path(k) for k in keys]
    if all(p is not None for p in local):
        paths = [f"file://{p}" for p in local if p is not None]
    elif s3a.configure(spark, store):
        paths = [f"s3a://{store.fs_path(k)}" for k in keys]
    else:
        return None
    if not all(_SAFE_PATH.fullmatch(p.split("://", 1)[1]) for p in paths):
        return None
    return paths


def _has_hadoop_class(spark: SparkSession, name: str) -> bool:
    # Jars given with spark.jars are on the context class loader (as Spark loads them), not on
    # the loader Class.forName(name) alone would use from the py4j gateway.
    try:
        java: Any = spark.sparkContext._jvm
        loader = java.java.lang.Thread.currentThread().getContextClassLoader()
        java.java.lang.Class.forName(name, False, loader)
    except Exception:
        return False
    return True


def _no_native_reader(spark: SparkSession, store: Store) -> str:
    if isinstance(store, S3Store) and not s3a.connector_present(spark):
        return (
            f"Spark cannot read {store.uri!r} through S3A: hadoop-aws is not on the session's "
            f"classpath ({jvm.missing_message('s3a')}, then start the session with those jars); "
            "use reader='pyarrow' or 'auto'"
        )
    return (
        f"Spark's filesystem cannot read {store.uri!r} (no Hadoop connector for its scheme, "
        "or file names Hadoop would misread); use reader='pyarrow' or 'auto'"
    )


def _pyarrow_scan(
    spark: SparkSession, store: Store, keys: Sequence[str], schema: pa.Schema
) -> DataFrame:
    paths = [store.fs_path(k) for k in keys]
    slices = max(1, min(len(paths), spark.sparkContext.defaultParallelism * 2))

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        filesystem = store.filesystem
        for batch in batches:
            for index in batch.column(0).to_pylist():
                yield from file_batches(filesystem, paths[index], schema)

    return spark.range(0, len(paths), 1, slices).mapInArrow(read, spark_schema(schema))


def file_batches(filesystem: Any, path: str, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
    """The batches of one data file in ``schema`` (missing columns NULL, narrower types cast)."""
    with filesystem.open_input_file(path) as source:
        parquet = pq.ParquetFile(source)
        present = [n for n in schema.names if n in parquet.schema_arrow.names]
        for batch in parquet.iter_batches(batch_size=128 * 1024, columns=present):
            columns = [
                batch.column(f.name).cast(f.type)
                if f.name in present
                else pa.nulls(batch.num_rows, f.type)
                for f in schema
            ]
            yield pa.RecordBatch.from_arrays(columns, schema=schema)


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def col(name: str) -> Column:
    """A column by name, whatever characters the name holds."""
    return F.col(_quoted(name))


# --- read-modify-write ---------------------------------------------------------------------------


def live_entries(
    entries: DataFrame,
    keys: DataFrame,
    key_columns: Sequence[str],
    value_columns: Sequence[str],
    latest_first: Sequence[str] | None = None,
) -> tuple[DataFrame, DataFrame]:
    """For ``keys``: the visible row of each key, and one row per live entry (the delete marks
    an update writes), as in ``ledger.live`` (entries of a key with equal values cancel by sign;
    the visible row is the live entry inserted last).

    ``latest_first`` (columns, each descending with NULLs last) switches to replacing
    semantics: a key's only live entry is its latest entry, if that is an insertion."""
    touched = entries.join(keys.select(*map(col, key_columns)), list(key_columns), "left_semi")
    by_key = Window.partitionBy(*map(col, key_columns))
    if latest_first is not None:
        order = [col(c).desc_nulls_last() for c in latest_first]
        latest = (
            touched.withColumn("__ledger_rank", F.row_number().over(by_key.orderBy(*order)))
            .filter("__ledger_rank = 1")
            .filter(col(DML_TYPE) == 1)
            .select(*map(col, value_columns))
        )
        return latest, latest
    live = (
        touched.groupBy(*map(col, value_columns))
        .agg(
            F.sum(col(DML_TYPE)).cast("bigint").alias(_NET),
            F.max(F.when(col(DML_TYPE) == 1, F.struct(col(TRX_ID), col(TRX_SEQ)))).alias(_ORDER),
        )
        .filter(F.col(_NET) > 0)
    )
    visible = (
        live.withColumn("__ledger_rank", F.row_number().over(by_key.orderBy(F.col(_ORDER).desc())))
        .filter("__ledger_rank = 1")
        .select(*map(col, value_columns))
    )
    marks = live.withColumn("__ledger_copy", F.explode(F.sequence(F.lit(1), F.col(_NET)))).select(
        *map(col, value_columns)
    )
    return visible, marks


def stale_versions(
    entries: DataFrame,
    rows: DataFrame,
    key_columns: Sequence[str],
    version_column: str,
    latest_first: Sequence[str],
) -> DataFrame:
    """The rows whose version ranks below the version of their key's latest entry (a delete
    mark counts), as in ``ledger.engines.duckdb.rmw.stale_versions``: key columns, ``given`` and
    ``current``. A NULL version ranks below every other version."""
    touched = entries.join(rows.select(*map(col, key_columns)), list(key_columns), "left_semi")
    by_key = Window.partitionBy(*map(col, key_columns))
    order = [col(c).desc_nulls_last() for c in latest_first]
    latest = (
        touched.withColumn("__ledger_rank", F.row_number().over(by_key.orderBy(*order)))
        .filter("__ledger_rank = 1")
        .select(*map(col, key_columns), col(version_column).alias("current"))
    )
    given = rows.select(*map(col, key_columns), col(version_column).alias("given"))
    return given.join(latest, list(key_columns)).filter(
        F.col("current").isNotNull()
        & (F.col("given").isNull() | (F.col("given") < F.col("current")))
    )


_INTEGERS = (T.ByteType, T.ShortType, T.IntegerType, T.LongType)
_FLOATS = (T.FloatType, T.DoubleType)
# Integers a float holds exactly, as Arrow's safe cast checks them: |v| <= 2**24 or 2**53.
_EXACT_INTEGERS = {T.FloatType: 2**24, T.DoubleType: 2**53}
# Each integer type holds -bound <= v < bound.
_INTEGER_BOUNDS = {T.ByteType: 2**7, T.ShortType: 2**15, T.IntegerType: 2**31, T.LongType: 2**63}


# A FLOAT rounds a value by at most this fraction of it, within its normal range.
_FLOAT_RELATIVE_ERROR = 2.0**-24


def converted(name: str, source: T.DataType, target: T.DataType) -> Column:
    """Column ``name`` (of ``source`` type) cast to ``target`` as the embedded engine casts it
    (``ledger.schema._cast_column``), where Spark's own cast differs:

    - a float goes into a DECIMAL as its shortest text (``repr``'s digits), not as Java's
      longer digits, by the same Arrow cast as the embedded engine;
    - a TIMESTAMP (Spark's default type, an instant) goes into a TIMESTAMP without zone as its
      UTC time, where Spark's cast would take the wall time of the session's time zone."""
    value = col(name)
    if isinstance(source, T.StringType) and not isinstance(target, (T.StringType, T.BinaryType)):
        return _parsed_text(value, target)
    if isinstance(source, _FLOATS) and isinstance(target, T.DecimalType):
        return _shortest_text(value).try_cast(target)
    if isinstance(source, T.TimestampType) and isinstance(target, T.TimestampNTZType):
        epoch = F.lit(_UNIX_EPOCH).cast(T.TimestampNTZType())
        return F.timestamp_add("MICROSECOND", F.unix_micros(value), epoch)
    return value.try_cast(target)


_UNIX_EPOCH = "1970-01-01 00:00:00"


def _float_text(values: pa.Array) -> pa.Array:
    """Floats as their shortest text, by the Arrow cast the embedded engine uses."""
    text: pa.Array = values.cast(pa.string())
    return text


def _shortest_text(value: Column) -> Column:
    # Run on the executors as an Arrow UDF: Spark's own float formatting starts from Java's
    # digits, which for some doubles round to a different, longer decimal.
    # PySpark's stubs want a functionType, its runtime prefers (and warns otherwise) type hints.
    udf = arrow_udf(_float_text, T.StringType())  # type: ignore[call-overload]
    text: Column = udf(value)
    return text


def _parsed_text(value: Column, target: T.DataType) -> Column:
    """Text parsed as the embedded engine parses it (``ledger.schema.parse_text``, Arrow's CSV
    parser), run on the executors as an Arrow UDF; a value it refuses is NULL here, so
    :func:`lossy` finds it and the driver raises the embedded engine's error for it. Spark's own
    cast rounds ``"19.999"`` into a DECIMAL(18,2) instead of refusing it."""
    arrow_target = to_arrow_type(target, timezone="UTC", prefers_large_types=False)

    def parse(values: pa.Array) -> pa.Array:
        column = pa.chunked_array([values])
        try:
            parsed: pa.Array = parse_text("", column, arrow_target).combine_chunks()
            return parsed
        except errors.TypeMismatchError:
            return pa.array([_parsed_or_none(v, arrow_target) for v in values], arrow_target)

    udf = arrow_udf(parse, target)  # type: ignore[call-overload]
    parsed_column: Column = udf(value)
    return parsed_column


def _parsed_or_none(value: pa.Scalar, target: pa.DataType) -> Any:
    if not value.is_valid:
        return None
    try:
        return parse_text("", pa.chunked_array([[value.as_py()]]), target)[0].as_py()
    except errors.TypeMismatchError:
        return None


def lossy(name: str, source: T.DataType, target: T.DataType) -> Column:
    """Whether a value of column ``name`` (of ``source`` type) would be changed or refused by
    the embedded engine's cast to ``target`` (``ledger.schema._cast_column``), per type pair:

    - anything that does not fit at all (:func:`converted` gives NULL);
    - an integer into a float beyond the integers the float holds exactly (2**24, 2**53);
    - a decimal rounded to a smaller scale;
    - a float into a decimal whose shortest text has more decimal places than the scale (the
      decimal does not read back as the same float), or more digits than the precision;
    - a float into an integer that is not a whole number in range;
    - a double into a FLOAT changed by more than 2**-24 of itself: overflow to infinity,
      underflow to zero or to a subnormal FLOAT (a double rounded into a FLOAT is accepted, and
      so is a decimal rounded into a float, as in Arrow)."""
    if isinstance(source, T.NullType):
        return F.lit(False)
    value = col(name)
    if isinstance(source, _INTEGERS) and isinstance(target, _FLOATS):
        exact = _EXACT_INTEGERS[type(target)]
        return (value > F.lit(exact)) | (value < F.lit(-exact))
    cast = converted(name, source, target)
    changed = cast.isNull()
    if isinstance(source, _FLOATS) and isinstance(target, T.FloatType):
        # Spark orders NaN above every number, so NaN and infinities (kept as they are) are
        # left out before comparing.
        special = F.isnan(value) | value.isin([float("inf"), float("-inf")])
        error = F.abs(cast.cast("double") - value.cast("double"))
        too_far = error > F.abs(value.cast("double")) * F.lit(_FLOAT_RELATIVE_ERROR)
        changed = changed | (~special & too_far)
    elif isinstance(source, (*_FLOATS, T.DecimalType)) and isinstance(
        target, (T.DecimalType, *_INTEGERS)
    ):
        # Floats into decimals or integers, decimals into smaller scales: kept only if exact.
        changed = changed | (cast.cast(source) != value)
        if isinstance(target, _INTEGERS):  # Spark clamps 2**63 to the Long maximum
            bound = float(_INTEGER_BOUNDS[type(target)])
            changed = changed | (value >= F.lit(bound)) | (value < F.lit(-bound))
    return value.isNotNull() & changed


def key_problems(
    rows: DataFrame, key_columns: Sequence[str], limit: int = 3
) -> tuple[bool, list[dict[str, Any]]]:
    """In one job: whether a key column of ``rows`` holds NULL, and up to ``limit`` keys that
    appear more than once."""
    keys = list(key_columns)
    null = F.lit(False)
    for k in keys:
        null = null | col(k).isNull()
    found = (
        rows.groupBy(*map(col, keys))
        .agg(F.count(F.lit(1)).alias("__ledger_n"))
        .withColumn("__ledger_null", null)
        .filter(F.col("__ledger_null") | (F.col("__ledger_n") > 1))
        .orderBy(F.col("__ledger_null").desc())
        .limit(limit + 1)
        .collect()
    )
    has_null = bool(found) and bool(found[0]["__ledger_null"])
    duplicated = [{k: r[k] for k in keys} for r in found if not r["__ledger_null"]]
    return has_null, duplicated[:limit]


def to_arrow(df: DataFrame) -> pa.Table:
    """Collect a (small) DataFrame to the driver as Arrow."""
    table: pa.Table = df.toArrow()
    return table


# --- writes --------------------------------------------------------------------------------------


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
        written = df.mapInArrow(
            lambda batches: _write_task(job, batches), "marker string"
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


# --- merges --------------------------------------------------------------------------------------

ENTRIES = "entries"  # the relation a merge policy's query reads (as on DuckDB)


@dataclass(frozen=True)
class RewriteJob:
    """What an executor needs to run a merge policy's query over one key range of a partition
    and write the result."""

    store: Store
    table_prefix: str
    schema: TableSchema
    config: TableConfig
    partition: dict[str, str | None]
    sql: str
    file_rows: int
    row_group_rows: int


def rewrite_entries(
    entries: DataFrame, job: RewriteJob, group_columns: Sequence[str], ranges: int
) -> list[FileMarker]:
    """Run ``job.sql`` (DuckDB SQL over ``entries``) on each of ``ranges`` key ranges of
    ``entries`` (every entry of one group in one range), write each result sorted; return the
    markers."""
    spread = entries.repartitionByRange(ranges, *map(col, group_columns))
    with arrow_batches(entries.sparkSession):
        written = spread.mapInArrow(
            lambda batches: _rewrite_task(job, batches), "marker string"
        ).collect()
    return [FileMarker.from_json(json.loads(row["marker"])) for row in written]


def _rewrite_task(job: RewriteJob, batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    from ledger.engines.duckdb import session as embedded

    schema = file_schema(job.schema, job.config)
    pending = [b for b in batches if b.num_rows]
    if not pending:
        return
    entries = pa.Table.from_batches(pending).cast(schema)
    writer = DataWriter(
        job.store,
        job.table_prefix,
        job.schema,
        job.config,
        PartitionSpec.parse(list(job.config.partition_by), job.schema),
    )
    sink = SortedFileSink(
        writer, job.partition, file_rows=job.file_rows, row_group_rows=job.row_group_rows
    )
    order = ", ".join(f'"{c}" ASC NULLS LAST' for c in sort_columns(job.config))
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
            job.store.delete(key)
        raise
    yield pa.RecordBatch.from_pydict(
        {"marker": [json.dumps(m.to_json()) for m in markers]}, pa.schema([("marker", pa.string())])
    )


# --- change sets (rollup refresh) ----------------------------------------------------------------


def signed_entries(
    spark: SparkSession,
    store: Store,
    table_prefix: str,
    added: Sequence[FileMarker],
    removed: Sequence[FileMarker],
    schema: pa.Schema,
    *,
    reader: str = "auto",
) -> DataFrame:
    """The entries of ``added`` files, and those of ``removed`` files with the opposite sign:
    what a change set adds to any sign-weighted sum."""
    parts = []
    if added:
        parts.append(scan_files(spark, store, table_prefix, added, schema, reader=reader))
    if removed:
        parts.append(
            scan_files(spark, store, table_prefix, removed, schema, reader=reader).withColumn(
                DML_TYPE, (-col(DML_TYPE)).cast("tinyint")
            )
        )
    if not parts:
        return spark.createDataFrame([], spark_schema(schema))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def change_entries(
    spark: SparkSession,
    store: Store,
    table_prefix: str,
    changes: Any,
    schema: pa.Schema,
    *,
    reader: str = "auto",
) -> DataFrame:
    """The entries of a change set (``ledger.changes.ChangeSet``) with ``_commit_version`` and
    ``_commit_timestamp``, as ``engines.duckdb.changes.change_entries`` gives them: entries of
    written files joined to their commit by ``trx_id``; for each commit that replaced files,
    the entries of its removed (negated) and added files netted per value tuple, each left as
    many times as its net sign says."""
    columns = [f.name for f in schema]
    values = [c for c in columns if c not in (TRX_ID, TRX_SEQ, DML_TYPE)]
    stamp = T.TimestampType()
    parts: list[DataFrame] = []
    if changes.written:
        commits = spark.createDataFrame(
            [(trx, version, ms) for trx, (version, ms) in changes.commits.items()],
            "__ledger_trx bigint, __ledger_version bigint, __ledger_ms bigint",
        )
        written = scan_files(
            spark, store, table_prefix, list(changes.written), schema, reader=reader
        )
        parts.append(
            written.join(F.broadcast(commits), col(TRX_ID) == F.col("__ledger_trx")).select(
                *map(col, columns),
                F.col("__ledger_version").alias("_commit_version"),
                F.timestamp_millis(F.col("__ledger_ms")).cast(stamp).alias("_commit_timestamp"),
            )
        )
    for commit in changes.replaced:
        if not commit.added and not commit.removed:
            continue
        signed = signed_entries(
            spark,
            store,
            table_prefix,
            list(commit.added),
            list(commit.removed),
            schema,
            reader=reader,
        )
        netted = (
            signed.groupBy(*map(col, values))
            .agg(
                F.max(col(TRX_ID)).alias(TRX_ID),
                F.max(col(TRX_SEQ)).alias(TRX_SEQ),
                F.sum(col(DML_TYPE)).alias(_NET),
            )
            .filter(F.col(_NET) != 0)
        )
        copies = netted.withColumn(
            "__ledger_copy", F.explode(F.sequence(F.lit(1), F.abs(F.col(_NET))))
        ).withColumn(DML_TYPE, F.signum(F.col(_NET)).cast("tinyint"))
        parts.append(
            copies.select(
                *map(col, columns),
                F.lit(commit.version).cast("bigint").alias("_commit_version"),
                F.timestamp_millis(F.lit(commit.timestamp_ms))
                .cast(stamp)
                .alias("_commit_timestamp"),
            )
        )
    if not parts:
        extra = [("_commit_version", pa.int64()), ("_commit_timestamp", pa.timestamp("us", "UTC"))]
        return spark.createDataFrame([], spark_schema(pa.schema([*schema, *extra])))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


# --- streaming -----------------------------------------------------------------------------------


def streaming_query_id(batch: DataFrame) -> str | None:
    """The id of the streaming query a ``foreachBatch`` micro-batch belongs to (stable across
    restarts from the same checkpoint), or None outside a stream."""
    context: Any = batch.sparkSession.sparkContext
    value = context.getLocalProperty("sql.streaming.queryId")
    return None if value is None else str(value)


# --- Delta Lake publishing (delta-spark) ---------------------------------------------------------

# Session settings delta-spark reads for the next commit: the application transaction that makes
# a retried publish a no-op in Delta, and the commit's user metadata.
_TXN_APP_ID = "spark.databricks.delta.write.txnAppId"
_TXN_VERSION = "spark.databricks.delta.write.txnVersion"
_USER_METADATA = "spark.databricks.delta.commitInfo.userMetadata"
_DELTA_SPARK_FORBIDDEN = frozenset(" ,;{}()\n\t=")


def delta_available(spark: SparkSession) -> bool:
    """Whether delta-spark's Python package and its jars are both there."""
    try:
        import delta.tables  # noqa: F401
    except ImportError:
        return False
    return _has_hadoop_class(spark, "io.delta.tables.DeltaTable")


def delta_publish(spark: SparkSession, target: str, plan: Any) -> int:
    """Apply a ``views.publish.PublishPlan`` to the Delta table at ``target`` with delta-spark:
    a full overwrite or one MERGE, recording the ledger version as the commit's application
    transaction (``txnAppId``/``txnVersion``), so a retried publish is skipped by Delta too.
    Returns the Delta table's version afterwards."""
    if not delta_available(spark):
        raise MissingDependencyError(
            "publishing on Spark needs delta-spark and the Delta Lake jars on the Spark "
            f"classpath: {jvm.missing_message('delta')}, and start the session with "
            "ledger.jvm.spark_options() (spark.jars); views.publish_delta publishes from the "
            "embedded engine without them"
        )
    from delta.tables import DeltaTable

    _check_delta_spark_names(plan.schema.names)
    commit_options = {
        _TXN_APP_ID: plan.app_id,
        _TXN_VERSION: str(plan.version),
        _USER_METADATA: json.dumps(plan.commit_metadata(), sort_keys=True),
    }
    if plan.new_columns:
        # The source's new columns, added (nullable) in a commit of their own that changes no
        # row, before the commit recording the version (which must not pick up these options).
        spark.sql(f"ALTER TABLE delta.{_spark_path(target)} ADD COLUMNS ({plan.new_columns_ddl()})")
    for name, value in commit_options.items():
        spark.conf.set(name, value)
    try:
        if plan.full:
            _delta_write(spark, plan.rows, target, "overwrite")
            return _delta_version(spark, target)
        before = _delta_version(spark, target)
        source = _frame(spark, plan.merge_source())
        (
            DeltaTable.forPath(spark, target)
            .alias("t")
            .merge(source.alias("s"), plan.merge_condition("spark", "t", "s"))
            .whenMatchedDelete()
            .whenNotMatchedInsert(
                condition=plan.insert_condition("spark", "s"),
                values=plan.insert_values("spark", "s"),
            )
            .execute()
        )
        if _delta_version(spark, target) == before:
            # A merge that changes no row commits nothing (e.g. only ledger merges since the
            # last publish): record the version in an empty append instead.
            _delta_write(spark, plan.rows.slice(0, 0), target, "append")
        return _delta_version(spark, target)
    finally:
        for name in commit_options:  # session settings: they would apply to later writes
            spark.conf.unset(name)


def _check_delta_spark_names(names: Sequence[str]) -> None:
    # delta-spark refuses these characters in column names of a table without column mapping
    # (deltalake writes them): refuse before anything is written, saying what to do.
    for name in names:
        found = sorted(set(name) & _DELTA_SPARK_FORBIDDEN)
        if found:
            raise errors.SchemaError(
                f"column {name!r} holds {found!r}, which delta-spark does not write into a Delta "
                f"table (it refuses any of {''.join(sorted(_DELTA_SPARK_FORBIDDEN))!r}); publish "
                "this table with views.publish_delta (deltalake writes such names), or rename "
                "the column"
            )


def _delta_write(spark: SparkSession, rows: pa.Table, target: str, mode: str) -> None:
    writer = _frame(spark, rows).write.format("delta").mode(mode)
    if mode == "overwrite":
        writer = writer.option("overwriteSchema", "true")
    writer.save(target)


def _frame(spark: SparkSession, rows: pa.Table) -> DataFrame:
    """``rows`` as a DataFrame with the Spark types of their Arrow schema (also when empty)."""
    return spark.createDataFrame(rows, schema=spark_schema(rows.schema))


def _spark_path(target: str) -> str:
    """A Delta table's path as Spark SQL's quoted identifier (backticks, inner ones doubled)."""
    return "`" + target.replace("`", "``") + "`"


def _delta_version(spark: SparkSession, target: str) -> int:
    from delta.tables import DeltaTable

    latest = DeltaTable.forPath(spark, target).history(1).select("version").first()
    assert latest is not None  # a Delta table has at least its creating commit
    return int(latest[0])
