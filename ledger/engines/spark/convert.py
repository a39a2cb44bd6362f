"""Incoming DataFrames made into the table's rows as the embedded engine makes them: columns
checked and cast to the table's types by the embedded engine's rules (where Spark's own cast
differs, an Arrow UDF does the embedded engine's conversion), and rows shaped by the table's
insert transform."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.functions import arrow_udf
from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema, to_arrow_type

from ledger import errors, insert_transform
from ledger.engines.spark.errors import task_errors
from ledger.engines.spark.session import map_in_arrow
from ledger.errors import InvalidArgumentError, SchemaError, TypeMismatchError
from ledger.schema import DML_TYPE, ROW_ID, check_data_names, conform, parse_text
from ledger.writer import file_schema

if TYPE_CHECKING:
    from ledger.transaction import Transaction


def spark_schema(schema: pa.Schema) -> T.StructType:
    """The Spark schema of an Arrow schema (TIMESTAMP without a zone is TIMESTAMP_NTZ)."""
    return from_arrow_schema(schema, prefer_timestamp_ntz=True)


def arrow_schema(df: DataFrame) -> pa.Schema:
    """The Arrow schema a DataFrame's rows arrive in at executors."""
    return to_arrow_schema(df.schema, timezone="UTC")


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


def col(name: str) -> Column:
    """A column by name, whatever characters the name holds."""
    return F.col(_quoted(name))


def checked_frame(data: Any) -> DataFrame:
    """``data`` if it is a pyspark DataFrame, else a clear error."""
    if not isinstance(data, DataFrame):
        raise InvalidArgumentError(
            f"ledger.spark writes a pyspark DataFrame, not {type(data).__name__}; the embedded "
            "engine (table.insert) takes Arrow, pandas and lists"
        )
    frame: DataFrame = data
    return frame


def conformed_columns(
    tx: Transaction, data: DataFrame, *, require_keys: bool, passing: Sequence[str] = ()
) -> DataFrame:
    """Check ``data``'s columns and types against the table before anything runs (evolving the
    schema if the transaction allows it) and cast each column to the table's type; the columns
    ``passing`` (a row number, say) are not the table's and pass through as they are.

    The types are checked on the driver; the values in one Spark job that finds, per column,
    the values a cast would change (:func:`lossy`). The first such value of each column is
    then conformed on the driver by the embedded engine's own rules, so the same value gets the
    same typed error or, with ``evolve_schema``, widens the column the same way."""
    config = tx.config
    columns = list(data.columns)
    check_data_names(columns)  # Spark cannot even select one of two names equal without case
    if ROW_ID in columns and not config.generated_row_id:
        raise SchemaError("_row_id is a system column; this table has a primary key")
    user = [c for c in columns if c not in (ROW_ID, DML_TYPE, *passing)]
    source = arrow_schema(data.select(*map(col, user)))
    keys = () if config.generated_row_id else config.key_columns
    _, schema = conform(
        source.empty_table(),
        tx.schema,
        key_columns=keys,
        allow_new_columns=tx.evolves_schema,
        require_all_keys=require_keys,
    )
    for _ in range(3):  # a widened column is checked again against its new type
        target = spark_schema(file_schema(schema, config))
        changed = [c for c in user if data.schema[c].dataType != target[c].dataType]
        if not changed:
            break
        found = data.agg(
            *[
                F.first(
                    F.when(
                        lossy(c, data.schema[c].dataType, target[c].dataType),
                        col(c),
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
        converted(c, data.schema[c].dataType, target[c].dataType).alias(c)
        if data.schema[c].dataType != target[c].dataType
        else col(c)
        for c in user
    ]
    if ROW_ID in columns:
        projected.append(col(ROW_ID).cast("bigint").alias(ROW_ID))
    if DML_TYPE in columns:
        projected.append(col(DML_TYPE))
    projected.extend(col(c) for c in passing)
    out: DataFrame = data.select(*projected)
    return out


def transformed(tx: Transaction, frame: DataFrame, *, inserted: bool = False) -> DataFrame:
    """The rows as the table's insert transform (at the transaction's snapshot) shapes them.
    Rows ``inserted`` that leave out a column of the table the transform reads hold it as NULL,
    as the embedded engine's insert does (``insert_transform.apply``)."""
    sql = tx.config.insert_transform
    if sql is None:
        return frame
    left_out = insert_transform.left_out_columns(sql, frame.columns, tx.schema) if inserted else []
    if left_out:
        kinds = spark_schema(pa.schema(left_out))
        nulls = [F.lit(None).cast(f.dataType).alias(f.name) for f in kinds.fields]
        frame = frame.select("*", *nulls)
    return insert_transformed(frame, sql)


def insert_transformed(
    df: DataFrame, sql: str, *, shown: str | None = None, hidden: Sequence[str] = ()
) -> DataFrame:
    """``df`` as the table's insert transform shapes it: the very query the embedded engine
    runs (on an in-process DuckDB, over each Arrow batch, inside ``mapInArrow``), so a transform
    means the same on both engines; Spark SQL would give some functions and casts other
    meanings. A transform works row by row (``ledger.insert_transform``), so batches can be cut
    anywhere. The result is evaluated once here: a transform that fails on the data raises
    :class:`~ledger.errors.InsertTransformError` before anything is written, naming ``shown``
    and the columns but ``hidden`` ones (see ``insert_transform.apply``)."""
    hiding = tuple(hidden)
    empty = arrow_schema(df).empty_table()
    output = insert_transform.apply(sql, empty, shown=shown, hidden=hiding).schema
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
            rows = pa.Table.from_batches([batch])
            result = insert_transform.apply(sql, rows, shown=shown, hidden=hiding)
            yield from result.cast(output).to_batches()

    with task_errors("running the insert transform"):
        shaped: DataFrame = map_in_arrow(df, shape, target).localCheckpoint(eager=True)
    return shaped


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
    - a TIMESTAMP (Spark's default type, an instant) goes into a TIMESTAMP without zone, or a
      DATE, as its UTC time, where Spark's cast would take the wall time of the session's time
      zone."""
    value = col(name)
    if isinstance(source, T.StringType) and not isinstance(target, (T.StringType, T.BinaryType)):
        return _parsed_text(value, target)
    if isinstance(source, _FLOATS) and isinstance(target, T.DecimalType):
        return _shortest_text(value).try_cast(target)
    if isinstance(source, T.TimestampType) and isinstance(target, T.TimestampNTZType):
        return _utc_time(value)
    if isinstance(source, T.TimestampType) and isinstance(target, T.DateType):
        return _utc_time(value).try_cast(target)  # the UTC day, not the session zone's
    return value.try_cast(target)


def _utc_time(value: Column) -> Column:
    """An instant as its UTC time without zone."""
    epoch = F.lit(_UNIX_EPOCH).cast(T.TimestampNTZType())
    return F.timestamp_add("MICROSECOND", F.unix_micros(value), epoch)


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
    - a float into an integer that is not a whole number in range, or whose magnitude reaches
      the integers the float no longer holds apart (2**24, 2**53): it may have been rounded;
    - a double into a FLOAT changed by more than 2**-24 of itself: overflow to infinity,
      underflow to zero or to a subnormal FLOAT (a double rounded into a FLOAT is accepted, and
      so is a decimal rounded into a float, as in Arrow);
    - a timestamp into a DATE with a time of day (Spark's cast would drop it)."""
    if isinstance(source, T.NullType):
        return F.lit(False)
    value = col(name)
    if isinstance(source, _INTEGERS) and isinstance(target, _FLOATS):
        exact = _EXACT_INTEGERS[type(target)]
        return (value > F.lit(exact)) | (value < F.lit(-exact))
    cast = converted(name, source, target)
    changed = cast.isNull()
    if isinstance(source, (T.TimestampType, T.TimestampNTZType)) and isinstance(target, T.DateType):
        # A timestamp goes into a DATE at midnight only, an instant at UTC midnight
        # (ledger.schema.midnight_dates).
        wall = _utc_time(value) if isinstance(source, T.TimestampType) else value
        changed = changed | (cast.cast(T.TimestampNTZType()) != wall)
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
        if isinstance(source, _FLOATS) and isinstance(target, _INTEGERS):
            # A whole float this large may already have been rounded (a gap in a pandas
            # integer column made it a float): refused, as the embedded engine refuses it.
            largest_exact = float(_EXACT_INTEGERS[type(source)])
            finite = ~F.isnan(value) & ~value.isin([float("inf"), float("-inf")])
            changed = changed | (finite & (F.abs(value) >= F.lit(largest_exact)))
    return value.isNotNull() & changed
