"""Table schemas: SQL type names <-> Arrow types, system columns, and input conversion.

The log stores the schema as ``{"column": "SQL TYPE"}`` in column order. Every data file holds
the user columns followed by the system columns ``trx_id``, ``trx_seq`` and ``dml_type`` (and
``_row_id`` for tables without a primary key).
"""

from __future__ import annotations

import datetime as dt
import decimal
import functools
import itertools
import json
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ledger.errors import (
    InvalidArgumentError,
    MissingKeyError,
    SchemaError,
    TypeMismatchError,
    UnknownColumnError,
)

TRX_ID = "trx_id"
TRX_SEQ = "trx_seq"
DML_TYPE = "dml_type"
ROW_ID = "_row_id"
SYSTEM_TYPES: dict[str, pa.DataType] = {
    TRX_ID: pa.int64(),
    TRX_SEQ: pa.int32(),
    DML_TYPE: pa.int8(),
}
RESERVED = frozenset({TRX_ID, TRX_SEQ, DML_TYPE, ROW_ID})
INTERNAL_PREFIX = "__ledger"  # names of generated views' own columns and relations
# The change feed's own columns (views.changes adds them beside the table's columns).
CHANGE_TYPE = "_change_type"
COMMIT_VERSION = "_commit_version"
COMMIT_TIMESTAMP = "_commit_timestamp"
CHANGE_FEED_COLUMNS = frozenset({CHANGE_TYPE, COMMIT_VERSION, COMMIT_TIMESTAMP})

_SIMPLE_TYPES: dict[str, pa.DataType] = {
    "BOOLEAN": pa.bool_(),
    "TINYINT": pa.int8(),
    "SMALLINT": pa.int16(),
    "INTEGER": pa.int32(),
    "BIGINT": pa.int64(),
    "FLOAT": pa.float32(),
    "DOUBLE": pa.float64(),
    "VARCHAR": pa.string(),
    "BLOB": pa.binary(),
    "DATE": pa.date32(),
    "TIMESTAMP": pa.timestamp("us"),
    "TIMESTAMPTZ": pa.timestamp("us", tz="UTC"),
}
_ALIASES = {
    "BOOL": "BOOLEAN",
    "INT1": "TINYINT",
    "INT2": "SMALLINT",
    "SHORT": "SMALLINT",
    "INT": "INTEGER",
    "INT4": "INTEGER",
    "INT8": "BIGINT",
    "LONG": "BIGINT",
    "REAL": "FLOAT",
    "FLOAT4": "FLOAT",
    "FLOAT8": "DOUBLE",
    "STRING": "VARCHAR",
    "TEXT": "VARCHAR",
    "BYTEA": "BLOB",
    "BINARY": "BLOB",
    "TIMESTAMP WITH TIME ZONE": "TIMESTAMPTZ",
    "DATETIME": "TIMESTAMP",
}
_DECIMAL = re.compile(r"^(?:DECIMAL|NUMERIC)\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")
# Widening that schema evolution allows: old type -> the types it may become.
_WIDENINGS: dict[pa.DataType, tuple[pa.DataType, ...]] = {
    pa.int8(): (pa.int16(), pa.int32(), pa.int64()),
    pa.int16(): (pa.int32(), pa.int64()),
    pa.int32(): (pa.int64(),),
    pa.float32(): (pa.float64(),),
}


def sql_to_arrow(type_name: str) -> pa.DataType:
    """Parse a SQL type name (DuckDB spelling, common aliases) into an Arrow type.

    >>> sql_to_arrow("bigint")
    DataType(int64)
    """
    name = " ".join(type_name.strip().upper().split())
    name = _ALIASES.get(name, name)
    if name in _SIMPLE_TYPES:
        return _SIMPLE_TYPES[name]
    match = _DECIMAL.match(name)
    if match:
        precision, scale = int(match.group(1)), int(match.group(2))
        if not 1 <= precision <= 38 or scale > precision:
            raise SchemaError(
                f"invalid {type_name!r}: need 1 <= precision <= 38, scale <= precision"
            )
        return pa.decimal128(precision, scale)
    raise SchemaError(
        f"unknown column type {type_name!r}; use one of {sorted(_SIMPLE_TYPES)} or DECIMAL(p,s)"
    )


def arrow_to_sql(data_type: pa.DataType) -> str:
    """The canonical SQL name of an Arrow type the table format supports."""
    if pa.types.is_decimal(data_type):
        return f"DECIMAL({data_type.precision},{data_type.scale})"
    if pa.types.is_large_string(data_type) or pa.types.is_string_view(data_type):
        return "VARCHAR"
    if pa.types.is_large_binary(data_type):
        return "BLOB"
    if pa.types.is_timestamp(data_type):
        return "TIMESTAMP" if data_type.tz is None else "TIMESTAMPTZ"
    if pa.types.is_date(data_type):
        return "DATE"
    for name, candidate in _SIMPLE_TYPES.items():
        if candidate == data_type:
            return name
    raise SchemaError(
        f"Arrow type {data_type} is not supported as a column type; supported: "
        f"{sorted(_SIMPLE_TYPES)} and DECIMAL(p,s)"
    )


def _normalise_arrow(data_type: pa.DataType) -> pa.DataType:
    """The storage type for an Arrow type given by a user (string views -> string, ts -> us)."""
    if pa.types.is_timestamp(data_type):
        return pa.timestamp("us", tz=None if data_type.tz is None else "UTC")
    if pa.types.is_date(data_type):
        return pa.date32()
    if pa.types.is_dictionary(data_type):  # pandas categoricals: the type of the values
        return _normalise_arrow(data_type.value_type)
    return sql_to_arrow(arrow_to_sql(data_type))


def folded_name(name: str) -> str:
    """The form in which engines compare column names: without case, character by character.

    Spark compares names with Java's ``equalsIgnoreCase`` (simple one-character case mapping, so
    ``"é"`` equals ``"É"`` and ``"ß"`` equals ``"ẞ"``, but ``"Straße"`` does not equal
    ``"STRASSE"``); DuckDB folds ASCII letters only, which this rule includes. Unicode
    normalisation forms stay distinct: no engine treats a composed and a decomposed accent alike.

    >>> folded_name("Trx_ID")
    'trx_id'
    """
    return "".join(_folded_char(c) for c in name)


def _folded_char(char: str) -> str:
    upper = char.upper()
    if len(upper) != 1:  # "ß".upper() is "SS": a one-character mapping leaves it alone
        upper = char
    return upper.lower()[0]  # "İ".lower() is "i" plus a combining dot: its simple mapping is "i"


_FOLDED_RESERVED = {folded_name(n): n for n in RESERVED}
_FOLDED_FEED_COLUMNS = frozenset(folded_name(n) for n in CHANGE_FEED_COLUMNS)


def check_column_names(names: Sequence[str]) -> None:
    """Refuse a list of user column names that engines cannot tell apart or that the ledger
    keeps for itself: empty names, NUL, system column names in any case, the generated views'
    prefix, and two names equal under :func:`folded_name`.

    >>> check_column_names(["id", "amount", "Straße", "STRASSE"])  # distinct to every engine
    """
    seen: dict[str, str] = {}
    for name in names:
        if not isinstance(name, str) or not name or "\x00" in name:
            raise SchemaError(
                f"invalid column name {name!r}: names must be non-empty text without NUL"
            )
        folded = folded_name(name)
        if folded in _FOLDED_RESERVED:
            raise SchemaError(
                f"column name {name!r} is reserved for the ledger's system column "
                f"{_FOLDED_RESERVED[folded]!r} (names are compared without case, as DuckDB and "
                f"Spark compare them; system columns: {sorted(RESERVED)}); rename the column"
            )
        if folded in _FOLDED_FEED_COLUMNS:
            raise SchemaError(
                f"column name {name!r} is the name of a change feed column "
                f"({sorted(CHANGE_FEED_COLUMNS)}, compared without case), which views.changes "
                "adds beside the table's columns; rename the column"
            )
        if folded.startswith(INTERNAL_PREFIX):
            raise SchemaError(
                f"column name {name!r} starts with {INTERNAL_PREFIX!r} (in any case), which "
                "generated views use for their own columns; rename the column"
            )
        if folded in seen and seen[folded] == name:
            raise SchemaError(f"column name {name!r} is given twice; give each column once")
        if folded in seen:
            raise SchemaError(
                f"column names {seen[folded]!r} and {name!r} differ only in case: DuckDB and "
                "Spark compare names without case, so they would read one column for the "
                "other; rename one of them"
            )
        seen[folded] = name


@dataclass(frozen=True)
class TableSchema:
    """The user columns of a table, in order, as ``(name, SQL type)`` pairs."""

    columns: tuple[tuple[str, str], ...]

    @staticmethod
    def parse(schema: Mapping[str, str] | pa.Schema | Iterable[tuple[str, str]]) -> TableSchema:
        """Accept ``{"col": "SQL TYPE"}``, a pyarrow schema, or ``[(col, type), ...]``."""
        if isinstance(schema, pa.Schema):
            pairs = [(f.name, arrow_to_sql(_normalise_arrow(f.type))) for f in schema]
        else:
            items = list(schema.items()) if isinstance(schema, Mapping) else _pairs(schema)
            for name, type_name in items:
                if not isinstance(name, str) or not isinstance(type_name, str):
                    raise SchemaError(
                        f"a schema maps column names to SQL type names (text), e.g. "
                        f'{{"id": "BIGINT"}}; got {name!r}: {type_name!r}'
                    )
            pairs = [(n, arrow_to_sql(sql_to_arrow(t))) for n, t in items]
        if not pairs:
            raise SchemaError("a table needs at least one column")
        check_column_names([n for n, _ in pairs])
        return TableSchema(tuple(pairs))

    @property
    def names(self) -> list[str]:
        return [n for n, _ in self.columns]

    def check_usable(self) -> None:
        """Refuse to read or write through a schema engines cannot tell the columns of apart.

        ``parse`` and ``evolve`` never make one; a log written by other tools (or by hand) can
        hold one, and DuckDB and Spark would then read one column for another.
        """
        if self.__dict__.get("_usable"):
            return  # checked once per schema: every write asks again
        try:
            check_column_names(self.names)
        except SchemaError as e:
            raise SchemaError(
                f"the table's schema in its log cannot be used: {e}. Its data files can still be "
                "listed with table.files() and read by any Parquet reader; copy the data into a "
                "new table with distinct column names"
            ) from e
        # A schema is immutable, so what is derived from it is kept beside its fields (outside
        # them: equality, hashing and the JSON form see the columns only).
        object.__setattr__(self, "_usable", True)

    def type_of(self, name: str) -> pa.DataType:
        types: dict[str, pa.DataType] = self.__dict__.setdefault("_arrow_types", {})
        found = types.get(name)
        if found is None:
            found = types[name] = sql_to_arrow(dict(self.columns)[name])
        return found

    def arrow(self) -> pa.Schema:
        found: pa.Schema | None = self.__dict__.get("_arrow_schema")
        if found is None:
            found = pa.schema([pa.field(n, self.type_of(n)) for n, _ in self.columns])
            object.__setattr__(self, "_arrow_schema", found)
        return found

    def evolve(self, incoming: pa.Schema) -> TableSchema:
        """The schema after accepting ``incoming``'s new columns and widenings.

        New columns are appended (nullable). A column may widen (int32 -> int64, float ->
        double); any other type change is refused.
        """
        current = dict(self.columns)
        pairs = list(self.columns)
        for field in incoming:
            if field.name in RESERVED:
                continue
            if pa.types.is_nested(field.type) and field.name not in current:
                raise SchemaError(f"new column {_nested_advice([field.name])}")
            new_type = _normalise_arrow(field.type) if not pa.types.is_null(field.type) else None
            if field.name not in current:
                check_column_names([*(n for n, _ in pairs), field.name])
                if new_type is None:
                    raise SchemaError(
                        f"new column {field.name!r} holds only NULLs, so its type is unknown; "
                        "add it in a write holding a value of it (a column of missing values "
                        "names no type, whatever its dtype)"
                    )
                pairs.append((field.name, arrow_to_sql(new_type)))
                continue
            old_type = sql_to_arrow(current[field.name])
            if new_type is None or new_type == old_type:
                continue
            if new_type in _WIDENINGS.get(old_type, ()):
                pairs = [(n, arrow_to_sql(new_type) if n == field.name else t) for n, t in pairs]
                continue
            if _fits(new_type, old_type):
                continue  # values convert (range-checked when cast)
            raise SchemaError(
                f"column {field.name!r} cannot change from {current[field.name]} to "
                f"{arrow_to_sql(new_type)}: schema evolution allows only new nullable columns "
                "and widening (INTEGER->BIGINT, FLOAT->DOUBLE)"
            )
        return TableSchema(tuple(pairs))

    def to_json(self) -> dict[str, str]:
        return dict(self.columns)

    @staticmethod
    def from_json(data: Mapping[str, str]) -> TableSchema:
        return TableSchema(tuple((str(n), str(t)) for n, t in data.items()))


def _pairs(schema: Any) -> list[tuple[Any, Any]]:
    """``[(name, type), ...]`` from a sequence of pairs, or a SchemaError saying what to pass."""
    usage = 'pass {"column": "SQL TYPE"}, a pyarrow schema, or [(column, type), ...]'
    if isinstance(schema, str | bytes) or not isinstance(schema, Iterable):
        raise SchemaError(f"a schema cannot be {type(schema).__name__} {schema!r}; {usage}")
    pairs = []
    for item in schema:
        if isinstance(item, str | bytes) or not isinstance(item, Sequence) or len(item) != 2:
            raise SchemaError(f"schema entry {item!r} is not a (column, type) pair; {usage}")
        pairs.append((item[0], item[1]))
    return pairs


def _fits(source: pa.DataType, target: pa.DataType) -> bool:
    """Whether values of ``source`` convert to ``target`` without changing kind.

    Integers go into wider integers, floats and decimals (range-checked later); floats into
    doubles; binaries, dates and timestamps into their own kind. Text goes into text, and into
    numbers, booleans, dates and timestamps by parsing, as CSV and JSON text is (each value
    checked by :func:`parse_text`).
    """
    if source == target or pa.types.is_null(source):
        return True
    if _is_text(source) and _parsed_from_text(target):
        return True
    if pa.types.is_integer(source):
        return bool(
            pa.types.is_integer(target)
            or pa.types.is_floating(target)
            or pa.types.is_decimal(target)
        )
    if pa.types.is_floating(source):
        # Into integers only when integral (checked by the cast): pandas holds an integer
        # column with missing values as floats with NaN.
        return bool(
            pa.types.is_floating(target)
            or pa.types.is_decimal(target)
            or pa.types.is_integer(target)
        )
    if pa.types.is_decimal(source):
        # Into integers only when whole and in range (checked by the cast): JSON parsed with
        # decimal.Decimal gives 2.0 as a decimal, as Spark's JSON reader does.
        return bool(
            pa.types.is_decimal(target)
            or pa.types.is_floating(target)
            or pa.types.is_integer(target)
        )
    kinds = (
        pa.types.is_string,
        pa.types.is_large_string,
        pa.types.is_string_view,
    )
    if any(k(source) for k in kinds):
        return bool(any(k(target) for k in kinds))
    if pa.types.is_binary(source) or pa.types.is_large_binary(source):
        return bool(pa.types.is_binary(target) or pa.types.is_large_binary(target))
    if pa.types.is_timestamp(source):
        # A timestamp goes into a DATE at midnight only (checked by midnight_dates).
        if pa.types.is_date(target):
            return True
        # An instant (with a zone) goes into a TIMESTAMP as its UTC time, as DuckDB and Spark
        # cast it; a TIMESTAMP without zone is no instant, so it never becomes a TIMESTAMPTZ.
        return bool(pa.types.is_timestamp(target)) and (source.tz is not None or target.tz is None)
    if pa.types.is_date(source):
        return bool(pa.types.is_date(target))
    if pa.types.is_boolean(source):
        return bool(pa.types.is_boolean(target))
    return False


def _is_text(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_string_view(data_type)
    )


def _parsed_from_text(target: pa.DataType) -> bool:
    """Column types text is parsed into (the types CSV and JSON files are read into)."""
    return bool(
        pa.types.is_integer(target)
        or pa.types.is_floating(target)
        or pa.types.is_decimal(target)
        or pa.types.is_boolean(target)
        or pa.types.is_date(target)
        or pa.types.is_timestamp(target)
    )


def parse_text(name: str, column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """Text parsed into a number, boolean, date or timestamp column exactly as a CSV file's
    text is (Arrow's parser, surrounding spaces ignored), or :class:`TypeMismatchError` naming
    the first value that does not parse or would change: ``"19.999"`` into ``DECIMAL(18,2)``,
    ``"1.5"`` into an integer, ``"1e39"`` into a FLOAT, an offset into a TIMESTAMP.

    >>> parse_text("price", pa.chunked_array([["19.99", " 5"]]), pa.decimal128(18, 2))[1]
    <pyarrow.Decimal128Scalar: Decimal('5.00')>
    """
    text = pc.utf8_trim_whitespace(column.cast(pa.string()))
    if pa.types.is_decimal(target):
        text = _zeros_with_exponents(text)
    if pa.types.is_integer(target):
        text = _integer_text(name, text, target)
    if pa.types.is_floating(target):
        _refuse_inexact_integer_text(name, text, target)
    # A FLOAT goes through DOUBLE, so the FLOAT rules (no overflow to infinity) apply to it.
    step = pa.float64() if target == pa.float32() else target

    def parsed_from(part: pa.ChunkedArray) -> pa.ChunkedArray:
        if pa.types.is_timestamp(step):
            return timestamps_from_text(part, step)
        if pa.types.is_date(step):
            return dates_from_text(name, part, step)
        return part.cast(step, safe=True)

    try:
        parsed = parsed_from(text)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        bad = text[_first_failing(text, parsed_from)].as_py()
        if pa.types.is_timestamp(step) or pa.types.is_date(step):
            raise TypeMismatchError(time_text_message(name, step, bad)) from e
        if pa.types.is_integer(step) and re.fullmatch(PLAIN_INTEGER_TEXT, bad or ""):
            # Digits only, so it failed by its size: in the words an int that large gets.
            raise TypeMismatchError(
                f"column {name!r} ({arrow_to_sql_or_str(target)}): value {bad} is out of its range"
            ) from e
        why = decimal_text_refusal(bad, step) if pa.types.is_decimal(step) else None
        if why is not None:
            raise TypeMismatchError(
                f"column {name!r} ({arrow_to_sql_or_str(target)}): {why}"
            ) from e
        raise TypeMismatchError(
            f"column {name!r} ({arrow_to_sql_or_str(target)}): text {bad!r} does not parse into "
            f"it without change ({e}); text is parsed as in a CSV file: fix the value or "
            "convert the column before writing"
        ) from e
    _refuse_overflowed_text(name, text, parsed, target)
    stored = parsed if step == target else _cast_column(name, parsed, target)
    _refuse_underflowed_text(name, text, stored, target)
    return stored


def _zeros_with_exponents(text: pa.ChunkedArray) -> pa.ChunkedArray:
    """``text`` with each zero written with an exponent (``0e76``, ``0.0E-400``) as ``0``:
    Arrow's decimal cast refuses an exponent beyond the type's digits even for a zero, which
    is a zero in any DECIMAL."""
    exponents = pc.fill_null(pc.match_substring_regex(text, "[eE]"), False)
    if not pc.any(exponents).as_py():
        return text
    values = text.to_pylist()
    for i, value in enumerate(values):
        zero = value is not None and bool(DECIMAL_NUMBER_TEXT.fullmatch(value))
        if zero and decimal.Decimal(value).is_zero():
            values[i] = "-0" if value.startswith("-") else "0"
    return pa.chunked_array([pa.array(values, pa.string())])


# An integer in plain decimal digits, and a number as CSV writers write one (``7``, ``-7.0``,
# ``7e3``), in ASCII digits.
PLAIN_INTEGER_TEXT = r"^[+-]?[0-9]+$"
# Plain digits Arrow's cast reads as they are (it refuses a "+" sign).
_ARROW_INTEGER_TEXT = r"^-?[0-9]+$"
DECIMAL_NUMBER_TEXT = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")


# Integer literals (no point, no exponent).
INTEGER_TEXT = re.compile(r"[+-]?[0-9]+")


def inexact_integer(text: str, target: pa.DataType) -> bool:
    """Whether ``text`` is an integer literal beyond those float type ``target`` holds."""
    return bool(INTEGER_TEXT.fullmatch(text)) and abs(int(text)) > FLOAT_EXACT_INTEGERS[target]


def inexact_integer_message(name: str, target: pa.DataType, text: str) -> str:
    """The refusal of integer ``text`` by float column ``name``: beyond the integers it holds
    exactly, it would be rounded (from every source: text, ``Decimal``, int, files)."""
    sql = arrow_to_sql_or_str(target)
    bits = FLOAT_EXACT_INTEGERS[target].bit_length() - 1
    return (
        f"column {name!r} ({sql}): integer {text} does not fit: {an(sql)} holds integers exactly "
        f"only within ±2**{bits}; make the column DECIMAL(38,0) or BIGINT, or write it as a "
        "decimal number (with a point) to have it rounded"
    )


def _refuse_inexact_integer_text(name: str, text: pa.ChunkedArray, target: pa.DataType) -> None:
    """Integer literals (``"9007199254740993"``) beyond those float column ``name`` holds
    exactly, refused as in a CSV file: Arrow's parser would round them. Only texts long
    enough to be such an integer are looked at."""
    digits = len(str(FLOAT_EXACT_INTEGERS[target]))
    long_enough = pc.greater_equal(pc.utf8_length(text), digits)
    if not pc.any(pc.fill_null(long_enough, False)).as_py():
        return
    for value in pc.filter(text, long_enough).to_pylist():
        if value is not None and inexact_integer(value, target):
            raise TypeMismatchError(inexact_integer_message(name, target, value))


def _integer_text(name: str, text: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """Text for integer column ``name`` as plain digits, as a CSV file's is read: a whole
    number written with a point or an exponent (``3.0``, ``1e3``) is its digits below 2**53
    (refused from there as a float may have rounded it); any other spelling Arrow's cast
    would take (``0x10``, read as hexadecimal) is refused with :class:`TypeMismatchError`."""
    plain = pc.fill_null(pc.match_substring_regex(text, _ARROW_INTEGER_TEXT), True)
    if pc.all(plain).as_py():
        return text
    sql = arrow_to_sql_or_str(target)
    digits: list[str | None] = []
    for value in text.to_pylist():
        if value is None or re.fullmatch(PLAIN_INTEGER_TEXT, value):
            digits.append(value if value is None else value.removeprefix("+"))
            continue
        number = decimal.Decimal(value) if DECIMAL_NUMBER_TEXT.fullmatch(value) else None
        if number is None or (number.adjusted() < 40 and number != number.to_integral_value()):
            raise TypeMismatchError(
                f"column {name!r} ({sql}): text {value!r} is not a whole number written in "
                "decimal digits; text is parsed as in a CSV file: fix the value or convert the "
                "column before writing"
            )
        if abs(number) >= FLOAT_EXACT_INTEGERS[pa.float64()]:
            raise TypeMismatchError(float_text_message(name, target, value))
        digits.append(str(int(number)))
    return pa.chunked_array([pa.array(digits, pa.string())])


def _refuse_underflowed_text(
    name: str, texts: pa.ChunkedArray, parsed: pa.ChunkedArray, target: pa.DataType
) -> None:
    """Arrow's parser reads a number too small for a float (``1e-400``) as 0: a value lost, so
    text with a nonzero digit stored as 0 is refused, as one too large is."""
    if not pa.types.is_floating(parsed.type):
        return
    zero = pc.fill_null(pc.equal(parsed, 0), False)
    if not pc.any(zero).as_py():
        return
    nonzero = pc.fill_null(pc.match_substring_regex(texts, NONZERO_NUMBER_TEXT), False)
    lost = pc.and_(zero, nonzero)
    if pc.any(lost).as_py():
        bad = texts[pc.index(lost, True).as_py()].as_py()
        raise TypeMismatchError(float_underflow_message(name, target, bad))


# A number written with a nonzero digit (``1e-400``, ``0.001``; not ``0``, ``0.0e5``).
NONZERO_NUMBER_TEXT = r"^[+-]?[0-9.]*[1-9][0-9.]*(?:[eE][+-]?[0-9]+)?$"


def float_underflow_message(name: str, target: pa.DataType, text: str) -> str:
    """The refusal of number ``text``, too small for float column ``name`` (it would be 0)."""
    sql = arrow_to_sql_or_str(target)
    smallest = "1.4e-45" if target == pa.float32() else "4.9e-324"
    return (
        f"column {name!r} ({sql}): value {text!r} is too small for it: {an(sql)} holds "
        f"magnitudes down to about {smallest}, and this one would be stored as 0; write 0 if "
        "0 is meant, or make the column DECIMAL"
    )


# How Arrow's parser spells an infinity (any case): text it reads as one on purpose.
INFINITY_TEXT = r"^[+-]?inf(inity)?$"


def _refuse_overflowed_text(
    name: str, texts: pa.ChunkedArray, parsed: pa.ChunkedArray, target: pa.DataType
) -> None:
    """Arrow's parser reads a number too large for a double (``1e400``) as infinity; only the
    words ``inf`` and ``-inf`` mean one, so such text is refused like any value that would
    change."""
    if not pa.types.is_floating(parsed.type):
        return
    infinite = pc.fill_null(pc.is_inf(parsed), False)
    if not pc.any(infinite).as_py():
        return
    spelled = pc.match_substring_regex(texts, INFINITY_TEXT, ignore_case=True)
    overflowed = pc.and_(infinite, pc.invert(pc.fill_null(spelled, False)))
    if pc.any(overflowed).as_py():
        bad = texts[pc.index(overflowed, True).as_py()].as_py()
        raise TypeMismatchError(float_overflow_message(name, target, bad))


def float_overflow_message(name: str, target: pa.DataType, text: str) -> str:
    """The refusal of number ``text``, too large for float column ``name``."""
    sql = arrow_to_sql_or_str(target)
    largest = "3.4e38" if target == pa.float32() else "1.8e308"
    return (
        f"column {name!r} ({sql}): value {text!r} is out of its range ({an(sql)} holds "
        f"magnitudes up to about {largest}; only the words inf and -inf are read as infinity); "
        "fix the value or convert the column before writing"
    )


# --- timestamps written as text ----------------------------------------------------------------
# Every source of text (CSV, JSON lines, dicts, pandas, Spark) parses timestamps by these: a
# column keeps microseconds, as an Arrow or pandas timestamp converted into it does, so digits
# after the microseconds that are zeros (``05.123456000``, as many writers print every value)
# are dropped, and nonzero ones (``05.123456789``) are refused, since storing them would change
# the value.

# A timestamp with 7 to 9 digits after the second, as Arrow's parser reads it (a ``T`` or a
# space between date and time; no zone, ``Z``, or an offset ``+hh``, ``+hhmm``, ``+hh:mm``).
_TIMESTAMP_TO_SECONDS = r"[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}:[0-9]{2}"
_ZONE = r"(Z|[+-][0-9]{2}(?::?[0-9]{2})?)?"
_ZERO_NANOSECONDS = re.compile(rf"^({_TIMESTAMP_TO_SECONDS}\.[0-9]{{6}})0{{1,3}}{_ZONE}$")
_SUB_MICROSECONDS = re.compile(rf"({_TIMESTAMP_TO_SECONDS}\.[0-9]{{6}})([0-9]{{1,3}}){_ZONE}")
# Why a text is no timestamp of a column (timestamp_refusal).
NO_OFFSET, OFFSET, BELOW_MICROSECONDS, INVALID = (
    "no offset",
    "offset",
    "below microseconds",
    "invalid",
)

_Texts = TypeVar("_Texts", pa.Array, pa.ChunkedArray)


def timestamps_from_text(texts: _Texts, kind: pa.DataType) -> _Texts:
    """``texts`` parsed into timestamp type ``kind`` by Arrow's ISO 8601 parser (the one its CSV
    reader uses), zero digits after the microseconds dropped where plain parsing fails; raises
    ``pa.ArrowInvalid`` when a text is no such timestamp (:func:`timestamp_refusal` says why).

    >>> timestamps_from_text(pa.array(["2024-01-02 03:04:05.123456000"]), pa.timestamp("us"))[0]
    <pyarrow.TimestampScalar: '2024-01-02T03:04:05.123456'>
    """
    try:
        parsed: _Texts = pc.cast(texts, kind)
    except pa.ArrowInvalid:
        parsed = pc.cast(without_zero_nanoseconds(texts), kind)
    return parsed


def dates_from_text(name: str, texts: _Texts, kind: pa.DataType) -> _Texts:
    """``texts`` parsed into date type ``kind``: a date (``2024-01-02``), or a timestamp at
    midnight (``2024-01-02 00:00:00``, as databases export a DATE held as a timestamp; one with
    a zone at midnight UTC, ``2024-01-02T00:00:00Z``, as a zoned datetime goes in). Raises
    ``pa.ArrowInvalid`` for text that is neither, and :class:`TypeMismatchError` naming a
    timestamp with a time of day.

    >>> dates_from_text("day", pa.array(["2024-01-02 00:00:00"]), pa.date32())[0]
    <pyarrow.Date32Scalar: datetime.date(2024, 1, 2)>
    """
    try:
        dates: _Texts = pc.cast(texts, kind)
    except pa.ArrowInvalid:
        # Arrow's timestamp parser reads a date too, as its midnight.
        try:
            timestamps = timestamps_from_text(texts, pa.timestamp("us"))
        except pa.ArrowInvalid:
            # Texts with a zone (``2024-01-02T00:00:00Z``): instants, taken at their UTC time
            # as a zoned datetime is; a mix with texts without one is still refused.
            try:
                timestamps = timestamps_from_text(texts, pa.timestamp("us", tz="UTC"))
            except pa.ArrowInvalid:
                timestamps = timestamps_from_text(texts, pa.timestamp("us"))
        dates = midnight_dates(name, timestamps, kind)
    return dates


def midnight_dates(name: str, column: _Texts, kind: pa.DataType) -> _Texts:
    """Timestamps ``column`` as dates of type ``kind``: each must be at midnight
    (``datetime(2024, 1, 2)``, a pandas Timestamp of a day), so the date loses nothing. A
    timestamp with a zone is an instant and goes in as its UTC time, as it goes into a
    TIMESTAMP column. A time of day, which the date would drop, is refused with
    :class:`TypeMismatchError` naming the value."""
    source = column.type
    wall = pc.cast(column, pa.timestamp(source.unit)) if source.tz is not None else column
    dates = pc.cast(wall, kind)  # Arrow's cast drops a time of day silently: checked here
    changed = pc.fill_null(pc.not_equal(pc.cast(dates, wall.type), wall), False)
    if pc.any(changed).as_py():
        if isinstance(changed, pa.ChunkedArray):
            changed = changed.combine_chunks()
        first = pc.indices_nonzero(changed)[0].as_py()
        sql = arrow_to_sql_or_str(kind)
        utc = " (in UTC, as an instant goes into a date)" if source.tz is not None else ""
        raise TypeMismatchError(
            f"column {name!r} ({sql}): value {_shown_timestamp(column, first)} has a time of "
            f"day{utc}, and {an(sql)} holds days: a timestamp goes into it only at midnight; "
            "convert the values to dates before writing (.date(), .dt.date, or .dt.normalize() "
            "to drop the time)"
        )
    return dates


def _shown_timestamp(column: _Texts, index: int) -> str:
    """Value ``index`` of timestamps ``column`` as Python shows it, or as Arrow writes it when
    Python cannot hold it (a zoned time early in year 1 is in year 0 in UTC)."""
    try:
        return str(column[index].as_py())
    except (OverflowError, ValueError):
        return str(pc.cast(column.slice(index, 1), pa.string())[0].as_py())


def without_zero_nanoseconds(texts: _Texts) -> _Texts:
    """``texts`` with zero digits after the microseconds dropped (other texts unchanged)."""
    dropped: _Texts = pc.replace_substring_regex(texts, _ZERO_NANOSECONDS.pattern, r"\1\2")
    return dropped


def timestamp_refusal(text: str, kind: pa.DataType) -> str | None:
    """Why ``text`` does not parse into timestamp type ``kind``: :data:`NO_OFFSET` (a
    TIMESTAMPTZ needs one), :data:`OFFSET` (a TIMESTAMP takes none), :data:`BELOW_MICROSECONDS`
    (nonzero digits after the microseconds), :data:`INVALID`; None when it parses."""
    if _parses_as_timestamp(text, kind):
        return None
    to_microseconds = _SUB_MICROSECONDS.fullmatch(text)
    exact = text if to_microseconds is None else to_microseconds.expand(r"\1\3")
    naive, instant = pa.timestamp("us"), pa.timestamp("us", tz="UTC")
    if kind != naive and _parses_as_timestamp(exact, naive):
        return NO_OFFSET
    if kind == naive and _parses_as_timestamp(exact, instant):
        return OFFSET
    if to_microseconds is not None and _parses_as_timestamp(exact, kind):
        return BELOW_MICROSECONDS
    return INVALID


def decimal_text_refusal(text: str, kind: pa.DataType) -> str | None:
    """Why number text ``text`` is no value of DECIMAL type ``kind`` (no number, more decimal
    places than its scale, more whole digits than it holds); None when it fits.

    >>> decimal_text_refusal("1.005", pa.decimal128(10, 2))
    "value '1.005' has more than 2 decimal place(s); round it"
    """
    shown = text.strip()
    if DECIMAL_NUMBER_TEXT.fullmatch(shown) is None:
        return (
            f"value {text!r} is not a valid number (write digits with a point for the "
            "fraction and no thousands separators, as '1234.50')"
        )
    number = decimal.Decimal(shown)
    scale, whole = int(kind.scale), int(kind.precision) - int(kind.scale)
    if number != 0 and number.adjusted() >= whole:
        return (
            f"value {text!r} does not fit: it has more than {whole} whole digit(s); widen the "
            "column"
        )
    if number != number.quantize(decimal.Decimal(1).scaleb(-scale), decimal.ROUND_DOWN):
        return f"value {text!r} has more than {scale} decimal place(s); round it"
    return None


def time_text_message(name: str, kind: pa.DataType, text: str) -> str:
    """Why text ``text`` of column ``name`` is no value of date or timestamp type ``kind``.

    >>> time_text_message("day", pa.date32(), "2024-02-30")[:50]
    "column 'day' (DATE): value '2024-02-30' is not a v"
    """
    sql = arrow_to_sql_or_str(kind)
    if pa.types.is_date(kind):
        return (
            f"column {name!r} ({sql}): value {text!r} is not a valid date (write it as "
            "'2026-01-03'); fix the value before writing"
        )
    refusal = timestamp_refusal(text, kind)
    if refusal == BELOW_MICROSECONDS:
        return below_microseconds_message(name, kind, text)
    if refusal == NO_OFFSET:
        return (
            f"column {name!r} ({sql}): value {text!r} has no UTC offset, and {an(sql)} column "
            "stores instants: write the offset in the text (e.g. '2026-01-03 10:00:00+00:00' or "
            "a trailing 'Z'), or make the column TIMESTAMP"
        )
    if refusal == OFFSET:
        return (
            f"column {name!r} ({sql}): value {text!r} has a UTC offset, and {an(sql)} column "
            "holds times without zone: write the time without offset, pass it as a datetime "
            "with tzinfo (stored as its UTC time), or make the column TIMESTAMPTZ"
        )
    example = "2026-01-03 10:00:00" + ("+00:00" if kind.tz is not None else "")
    return (
        f"column {name!r} ({sql}): value {text!r} is not a valid timestamp (write it in ISO "
        f"8601, as {example!r}); fix the value before writing"
    )


def below_microseconds_message(name: str, kind: pa.DataType, text: str) -> str:
    """The refusal of ``text``, whose digits after the microseconds are not zeros."""
    sql = arrow_to_sql_or_str(kind)
    return (
        f"column {name!r} ({sql}): value {text!r} does not fit: {an(sql)} keeps microseconds "
        "(6 digits after the second) and the digits after them are not zeros; round the value "
        "to microseconds"
    )


def _parses_as_timestamp(text: str, kind: pa.DataType) -> bool:
    try:
        timestamps_from_text(pa.array([text]), kind)
    except pa.ArrowInvalid:
        return False
    return True


def to_arrow(data: Any, schema: TableSchema) -> pa.Table:
    """Turn user data into an Arrow table (no conversion to the table's types yet).

    Accepts a pyarrow Table or RecordBatch, a list of dicts, a pandas DataFrame, or a mapping of
    column -> list. Lists of dicts are converted column by column with the table's types, so a
    value that does not fit names its column.
    """
    if isinstance(data, pa.Table):
        return data
    if isinstance(data, pa.RecordBatch):
        return pa.Table.from_batches([data])
    if isinstance(data, pa.RecordBatchReader):
        return data.read_all()
    if isinstance(data, list):
        return _from_pylist(data, schema)
    if isinstance(data, Mapping):
        scalars = [
            k
            for k, v in data.items()
            if isinstance(v, str | bytes | Mapping) or not hasattr(v, "__len__")
        ]
        if scalars:
            raise InvalidArgumentError(
                f"a dict given as data must map each column to a list of values; column "
                f"{scalars[0]!r} holds {type(data[scalars[0]]).__name__}: for one row, pass a "
                "list holding one dict ([{...}])"
            )
        lengths = {len(v) for v in data.values()}
        if len(lengths) > 1:
            raise InvalidArgumentError("all columns of a dict of lists must have the same length")
        rows = [
            dict(zip(data.keys(), values, strict=True))
            for values in zip(*data.values(), strict=True)
        ]
        if not rows:  # its columns, still checked as those of rows (see inputs.read_rows)
            return pa.table({name: pa.nulls(0) for name in data})
        return _from_pylist(rows, schema)
    module = type(data).__module__
    if module.startswith("pandas"):
        return _from_pandas(data, schema)
    raise InvalidArgumentError(
        f"cannot write data of type {type(data).__name__}; pass a pyarrow Table or "
        "RecordBatchReader, a list of dicts, or a pandas DataFrame"
    )


def _from_pandas(frame: Any, schema: TableSchema) -> pa.Table:
    """A pandas DataFrame as Arrow. Index levels named like a table column (a key set with
    ``set_index``, one level of a MultiIndex) become that column; other index levels are not
    data. Arrow turns NaN in float columns and NaT into NULL; conform() then converts the
    values (floats into integer columns when whole, time zones into UTC)."""
    named = [name for name in frame.index.names if name is not None and name in schema.names]
    _refuse_misspelt_index_levels(frame, schema)
    for name in named:
        # set_index(..., drop=False) keeps the column beside the level: fine while they agree.
        level = frame.index.get_level_values(name).to_series().reset_index(drop=True)
        if name in frame.columns and not level.equals(frame[name].reset_index(drop=True)):
            raise SchemaError(
                f"column {name!r} is given twice, as an index level and as a column, with "
                "different values; drop one (df.reset_index(drop=True) or df.drop(columns=...))"
            )
    levels = [name for name in named if name not in frame.columns]
    if levels:
        frame = frame.reset_index(level=levels)
    check_data_names([str(c) for c in frame.columns])
    frame = _densified(frame)
    python = [
        i
        for i, dtype in enumerate(frame.dtypes)
        if isinstance(dtype, np.dtype) and dtype.kind == "O"
    ]
    try:
        table = pa.Table.from_pandas(frame, preserve_index=False)
    except CONVERSION_ERRORS as e:
        if not python:
            raise TypeMismatchError(f"the DataFrame does not convert to Arrow: {e}") from e
        table = None
    if table is not None:
        # An object column Arrow read as text (or as nothing but missing values) holds what a
        # list of dicts would make of it: the common case stays at Arrow's speed.
        python = [i for i in python if not _is_text_or_null(table.column(i).type)]
        if not python:
            return table
    else:
        plain = frame.iloc[:, [i for i in range(frame.shape[1]) if i not in set(python)]]
        try:
            table = pa.Table.from_pandas(plain, preserve_index=False)
        except CONVERSION_ERRORS as e:
            raise TypeMismatchError(f"the DataFrame does not convert to Arrow: {e}") from e
    # An object column holds Python values: converted as the same values in a list of dicts
    # are (ints beyond 64 bits, numbers beside text, numbers into VARCHAR), pandas' missing
    # values (None, NaN, NaT, pd.NA, Decimal NaN: what isna() counts) as NULL.
    values = {}
    for i in python:
        column = frame.iloc[:, i]
        missing = column.isna().to_numpy()
        values[str(frame.columns[i])] = [
            None if gap else value for value, gap in zip(column.tolist(), missing, strict=True)
        ]
    objects = python_columns_to_arrow(values, schema)
    columns = {name: table.column(name) for name in table.column_names}
    columns.update({name: objects.column(name) for name in objects.column_names})
    return pa.table(
        [columns[str(name)] for name in frame.columns], names=list(map(str, frame.columns))
    )


def _is_text_or_null(data_type: pa.DataType) -> bool:
    return bool(_is_text(data_type) or pa.types.is_null(data_type))


def _densified(frame: Any) -> Any:
    """``frame`` with its sparse columns (which Arrow does not convert) as dense ones."""
    sparse = [name for name, dtype in frame.dtypes.items() if type(dtype).__name__ == "SparseDtype"]
    if not sparse:
        return frame
    frame = frame.copy(deep=False)
    for name in sparse:
        frame[name] = frame[name].sparse.to_dense()
    return frame


def _refuse_misspelt_index_levels(frame: Any, schema: TableSchema) -> None:
    """An index level named like a table column but for case or spaces (``ID`` for ``id``)
    that the frame does not also hold as a column: it would be dropped as no data, and its
    column left without values (a key refused as missing), so it is refused as a column of
    that spelling is, saying it is the index."""
    for level in frame.index.names:
        if not isinstance(level, str) or level in schema.names or level in frame.columns:
            continue
        spelling = _spelling_of(level, schema)
        if spelling is None or spelling in frame.columns:
            continue
        raise UnknownColumnError(
            f"the DataFrame's index is named {level!r}, which matches no column of the table "
            f"(names are matched exactly, spaces and case included), so it is not written; the "
            f"table has {spelling!r}: rename it (df.rename_axis(index={{{level!r}: "
            f"{spelling!r}}})) or reset_index() and rename the column"
        )


def _from_pylist(rows: list[Any], schema: TableSchema) -> pa.Table:
    """A list of dicts as Arrow, every column any row names (NULL where a row does not).

    Arrow converts the values column by column (as ``pa.Table.from_pylist`` does), inferring
    each column's type from its Python values; conform() then converts it to the table's type
    under the same rules as Arrow input (1.5 never becomes an INTEGER). Where that refuses a
    column, the rows go through Arrow's one pass over the rows as structs, whose inference takes
    a few more mixes (``[True, 0.5]`` as doubles, as ``[0.5, True]`` is read either way); only
    when that pass fails too is the column whose values do not fit named. Either way a column
    of the table that mixes Python kinds is then converted kind by kind (:func:`_kinds_apart`),
    so each value converts as it would alone.
    """
    return dicts_to_arrow(rows, schema)[0]


def dicts_to_arrow(rows: list[Any], schema: TableSchema) -> tuple[pa.Table, bool]:
    """:func:`_from_pylist`, and whether every row is known to name every column (True in the
    common case, found while gathering the values; False when that is not known).

    >>> table, same_names = dicts_to_arrow([{"id": 1}, {"id": 2}], schema)  # doctest: +SKIP
    >>> same_names  # doctest: +SKIP
    True
    """
    values = _same_named_dicts(rows)
    same_names = values is not None
    if values is None:
        if not all(issubclass(kind, Mapping) for kind in set(map(type, rows))):
            raise InvalidArgumentError("a list given as data must hold one dict per row")
        values, same_names = _gathered_values(rows) if rows else ({}, False)
    return _values_to_arrow(values, schema, rows), same_names


def python_columns_to_arrow(values: dict[str, list[Any]], schema: TableSchema) -> pa.Table:
    """Columns of Python values (a DataFrame's object columns) as Arrow, converted as a list of
    dicts holding the same values is (None is NULL).

    >>> python_columns_to_arrow({"n": [2**64, None]}, schema).column("n").type  # doctest: +SKIP
    Decimal128Type(decimal128(20, 0))
    """
    return _values_to_arrow(values, schema, None)


def _values_to_arrow(
    values: dict[str, list[Any]], schema: TableSchema, rows: list[Any] | None
) -> pa.Table:
    """Columns of Python values as Arrow (``rows``, when given, are the dicts they come from)."""
    try:
        table = pa.table({name: pa.array(column) for name, column in values.items()})
    except CONVERSION_ERRORS:
        if rows is None:
            names = list(values)
            rows = [
                dict(zip(names, row, strict=True)) for row in zip(*values.values(), strict=True)
            ]
        table = _from_pylist_as_structs(rows, schema)
    table = _mixed_times(table, values, schema)
    for field in table.schema:
        if pa.types.is_decimal(field.type) and field.name in schema.names:
            _refuse_inexact_whole_decimals(field.name, values[field.name], schema)
    table = _kinds_apart(values, table, schema)
    return _numbers_as_text(values, table, schema)


def _numbers_as_text(
    values: dict[str, list[Any]], table: pa.Table, schema: TableSchema
) -> pa.Table:
    """Numbers and booleans given for a VARCHAR column as their JSON text (see :func:`_as_text`),
    whether or not text is among them, so a row's value never depends on its neighbours."""
    for index, field in enumerate(table.schema):
        numeric = pa.types.is_integer(field.type) or pa.types.is_floating(field.type)
        if not (numeric or pa.types.is_boolean(field.type) or pa.types.is_decimal(field.type)):
            continue
        if field.name not in schema.names or schema.type_of(field.name) != pa.string():
            continue
        text = _as_text(values[field.name])
        if text is not None:
            table = table.set_column(index, field.name, text)
    return table


# ArrowNotImplementedError: Arrow's inference met a numpy scalar of another kind than the one it
# took first (`[datetime(...), np.int8(0)]`).
CONVERSION_ERRORS = (
    pa.ArrowInvalid,
    pa.ArrowTypeError,
    pa.ArrowNotImplementedError,
    OverflowError,
    TypeError,
    ValueError,
)


def _same_named_dicts(rows: list[Any]) -> dict[str, list[Any]] | None:
    """Each column's values when every row is a dict naming the columns the first row names:
    the common case, gathered in C-speed passes, one per column after one over the rows'
    sizes. dict's own lookup refuses a row of any other type, so no pass over the rows' types
    is needed (a fiftieth of a list's conversion). None otherwise: the caller then checks the
    rows' types and gathers their values whatever their shapes.

    A row with as many names as the first that has each of them names the same ones; sizes
    are compared first, so a row missing a name is never looked up by it (a defaultdict would
    add it)."""
    if not rows or not isinstance(rows[0], dict) or not rows[0]:
        return None
    names = list(rows[0])
    try:
        if set(map(len, rows)) != {len(names)}:
            return None
        return {name: list(map(dict.__getitem__, rows, itertools.repeat(name))) for name in names}
    except (KeyError, TypeError):  # a row of another type, or naming other columns
        return None


def _gathered_values(rows: list[Any]) -> tuple[dict[str, list[Any]], bool]:
    """Each column's Python values (None where a row does not name it), and whether every row
    names the same columns.

    When every row has as many names as the first and each of the first row's names is in
    every row, every row names the same columns: the common case, where values are gathered
    without a lookup that can miss."""
    names = list(rows[0])
    columns: dict[str, list[Any]] | None = None
    if set(map(len, rows)) <= {len(names)}:
        try:
            columns = {name: list(map(operator.itemgetter(name), rows)) for name in names}
        except KeyError:
            columns = None
    same_names = columns is not None
    if columns is None:
        names = list(dict.fromkeys(name for row in rows for name in row))
        columns = {name: [row.get(name) for row in rows] for name in names}
    return columns, same_names


def _from_pylist_as_structs(rows: list[Any], schema: TableSchema) -> pa.Table:
    """Arrow's one pass over the rows as structs, or the column that does not convert named."""
    try:
        structs = pa.array(rows)
    except CONVERSION_ERRORS:
        return _from_pylist_by_column(rows, schema)
    if not pa.types.is_struct(structs.type):  # Mappings that are not dicts convert otherwise
        return _from_pylist_by_column(rows, schema)
    if not structs.type.num_fields:
        return pa.table({})
    return pa.Table.from_struct_array(structs)


def _as_text(values: list[Any]) -> pa.Array | None:
    """Text, numbers and booleans for a VARCHAR column, as text: each number or boolean as its
    JSON text (``7``, ``7.5``, ``true``), as a JSON document would spell it, and a ``Decimal``
    as its own text (``Decimal("1.50")`` is ``"1.50"``, as a JSON-lines file writing ``1.50``
    stores it). None when another kind of value is among them (a date, a list): those are
    refused."""
    values = [_python_scalar(v) for v in values]  # numpy's numbers as the same Python values
    if not all(v is None or type(v) in _JSON_SCALARS for v in values):
        return None
    try:
        return pa.array(
            [
                v
                if v is None or type(v) is str
                else str(v)
                if type(v) is decimal.Decimal
                else json.dumps(v)
                for v in values
            ],
            pa.string(),
        )
    except CONVERSION_ERRORS:  # text that is no UTF-8 (a lone surrogate): refused as it was
        return None


_JSON_SCALARS = frozenset({str, int, float, bool, decimal.Decimal})


def _python_scalar(value: Any) -> Any:
    """A numpy number, bool or text (``np.int64(3)``, ``np.float32(1.5)``, ``np.True_``,
    ``np.str_``) as the Python value it holds; a numpy date (``np.datetime64("2024-01-02")``,
    which Arrow's conversion of Python values refuses) as a ``datetime.date``; any other value
    as it is."""
    if type(value).__module__ != "numpy" or not hasattr(value, "item"):
        return value
    if type(value).__name__ == "datetime64":
        unit = str(value.dtype)[len("datetime64[") : -1]
        return value.item() if unit in ("D", "W", "M", "Y") else value
    if type(value).__name__ == "timedelta64":
        return value
    return value.item()


def _mixed_times(table: pa.Table, gathered: dict[str, list[Any]], schema: TableSchema) -> pa.Table:
    """Arrow types a column of Python dates and datetimes by its first value and converts the
    rest silently: a datetime after a date loses its time of day, a naive datetime after an
    aware one is taken as UTC. Each value must convert as it would alone: into a ``TIMESTAMP``
    column naive and zoned datetimes are both taken (a zoned one as its UTC time), so a mix of
    them is; elsewhere one of the two kinds is refused alone, so a mix is too.

    A column of plain dates, or of plain datetimes, is proved clean by C-speed passes over its
    values (their types, then the datetimes' zones); only a column holding other kinds (pandas'
    Timestamp or NaT, numpy datetimes) is looked at value by value."""
    for index, field in enumerate(table.schema):
        is_date = pa.types.is_date(field.type)
        if not (is_date or pa.types.is_timestamp(field.type)):
            continue
        column = gathered[field.name]
        kinds = set(map(type, column))
        kinds.discard(type(None))
        if is_date and kinds <= {dt.date}:
            continue  # dates alone: nothing to lose
        if kinds <= {dt.datetime}:
            zones = set(map(_TZINFO, filter(_IS_VALUE, column)))
            if not (None in zones and len(zones) > 1) and not is_date:
                continue
        values = [v for v in column if v is not None and not _missing(v)]
        # A naive datetime at midnight among dates is that date (as alone into a DATE column).
        if is_date and any(isinstance(v, dt.datetime) and not _is_midnight(v) for v in values):
            raise TypeMismatchError(
                f"column {field.name!r} mixes dates and datetimes; a datetime would lose its "
                "time of day: give one kind (convert with .date() or datetime.combine)"
            )
        zoned = {v.tzinfo is not None for v in values if isinstance(v, dt.datetime)}
        if len(zoned) > 1:
            target = schema.type_of(field.name) if field.name in schema.names else None
            if target is not None and pa.types.is_timestamp(target) and target.tz is None:
                table = table.set_column(index, field.name, pa.array(list(map(_as_utc, column))))
                continue
            raise TypeMismatchError(
                f"column {field.name!r} mixes datetimes with and without a time zone; give "
                "every value a zone (or none)"
            )

    return table


def _as_utc(value: Any) -> Any:
    """A zoned datetime as the naive datetime of its UTC time (as a TIMESTAMP column takes it
    alone); any other value as it is."""
    if isinstance(value, dt.datetime) and value.utcoffset() is not None:
        return value.astimezone(dt.UTC).replace(tzinfo=None)
    return value


_TZINFO = operator.attrgetter("tzinfo")
_IS_VALUE = functools.partial(operator.is_not, None)


def _is_midnight(value: dt.datetime) -> bool:
    return value.tzinfo is None and value == dt.datetime.combine(value.date(), dt.time())


def _from_pylist_by_column(rows: list[Any], schema: TableSchema) -> pa.Table:
    """The slow path of :func:`_from_pylist`: column by column, so an error names the column."""
    names = list(dict.fromkeys(name for row in rows for name in row))
    _refuse_names_that_are_not_text(names)
    known = dict(schema.columns)
    columns = {}
    for name in names:
        values = [_python_day(row.get(name)) for row in rows]
        try:
            columns[name] = pa.array(values)
        except CONVERSION_ERRORS as e:
            is_text = name in known and schema.type_of(name) == pa.string()
            text = _as_text(values) if is_text else None
            if text is not None:
                columns[name] = text
                continue
            if name in known:
                columns[name] = _by_kind(name, values, schema)
                continue
            raise TypeMismatchError(
                f"column {name!r} ({known.get(name, 'new column')}): its values do not form one "
                f"type ({e})"
            ) from e
    return pa.table(columns) if columns else pa.table({})


def _python_day(value: Any) -> Any:
    """A numpy date (``np.datetime64("2024-01-02")``, which Arrow's conversion of Python
    values refuses) as a ``datetime.date``; any other value as it is."""
    if type(value).__name__ == "datetime64" and type(value).__module__ == "numpy":
        return _python_scalar(value)
    return value


def _refuse_names_that_are_not_text(names: list[Any]) -> None:
    """Column names are text: a dict key such as ``1`` names no column (Arrow would fail on it
    with a bare TypeError)."""
    others = [name for name in names if not isinstance(name, str)]
    if others:
        raise SchemaError(
            f"column names must be text; a row has the key {others[0]!r} "
            f"({type(others[0]).__name__}): name columns with strings"
        )


def _refuse_huge_int(name: str, values: list[Any], schema: TableSchema) -> None:
    """A Python int outside the 64-bit range Arrow converts, named with its column's type."""
    for value in values:
        if type(value) is int and not -(2**63) <= value < 2**63:
            declared = arrow_to_sql_or_str(schema.type_of(name))
            raise TypeMismatchError(
                f"column {name!r} ({declared}): value {value} is out of its range"
            )


def _wide_ints_as_decimals(values: list[Any], target: pa.DataType) -> pa.Array | None:
    """Python ints beyond 64 bits for a DECIMAL column, as decimals (Arrow converts ints only
    through int64): a DECIMAL(38,0) holds them when they fit its precision, as it does from a
    JSON file. None for other columns or values."""
    if not pa.types.is_decimal(target) or not all(type(v) is int for v in values):
        return None
    try:
        return pa.array([decimal.Decimal(v) for v in values])
    except CONVERSION_ERRORS:
        return None


def _by_kind(name: str, values: list[Any], schema: TableSchema) -> pa.Array:
    """A column of an existing table whose Python values are of several kinds (floats and
    Decimals, ints beside floats, datetimes and ISO text): each kind converted apart to the
    column's type under the usual rules, then put back in row order, so a value converts as it
    would alone. Datetimes with and without a zone are kinds apart (Arrow takes a naive one
    after a zoned one as UTC)."""
    positions: dict[tuple[type, bool], list[int]] = {}
    for index, value in enumerate(values):
        if value is not None:
            zoned = isinstance(value, dt.datetime) and value.tzinfo is not None
            positions.setdefault((type(value), zoned), []).append(index)
    target = schema.type_of(name)
    parts: list[pa.Array] = []
    order: list[int] = []
    for (kind, zoned), indices in positions.items():
        if kind is decimal.Decimal:
            _refuse_inexact_whole_decimals(name, [values[i] for i in indices], schema)
        part = _kind_array(name, [values[i] for i in indices], zoned, schema)
        if not _fits(part.type, target):
            value = values[indices[0]]
            if pa.types.is_timestamp(target) and target.tz is not None:
                raise TypeMismatchError(_unfit_message(name, part.type, target))
            raise TypeMismatchError(
                f"column {name!r} is {arrow_to_sql_or_str(target)} but the data holds "
                f"{type(value).__name__} {value!r}; convert the value before writing"
            )
        converted, _ = conform(pa.table({name: part}), schema, require_all_keys=False)
        parts.append(converted.column(name).combine_chunks())
        order.extend(indices)
    missing = [i for i, value in enumerate(values) if value is None]
    parts.append(pa.nulls(len(missing), target))
    order.extend(missing)
    gathered = pa.concat_arrays([p.cast(target) for p in parts])
    place = pa.array(order, pa.int64())
    return gathered.take(pc.sort_indices(place))


def _kind_array(name: str, values: list[Any], zoned: bool, schema: TableSchema) -> pa.Array:
    """Values of one Python kind as Arrow, as they would convert alone."""
    values = [None if _missing(v) else _arrow_time_unit(v) for v in values]
    _refuse_nanoseconds(name, values, schema)
    values = [_python_day(v) for v in values]
    try:
        if zoned:
            # Their UTC instants: Arrow's inference of a zone from the first value refuses an
            # offset with seconds (any zoneinfo time before about 1940, fromisoformat's
            # "+01:19:32"), which converts like any other offset once the type is given.
            return pa.array(values, pa.timestamp("us", tz="UTC"))
        return pa.array(values)
    except CONVERSION_ERRORS as e:
        wide = _wide_ints_as_decimals(values, schema.type_of(name))
        if wide is not None:
            return wide
        _refuse_huge_int(name, values, schema)
        _refuse_unstorable_decimals(name, values, schema)
        _refuse_invalid_unicode(name, values, schema)
        if all(isinstance(v, decimal.Decimal) for v in values if v is not None):
            # An exponent beyond any Arrow decimal's scale (Decimal("0E-400"), a zero): the
            # number goes as its text, as the same number from a file, under text's rules.
            return pa.array([v if v is None else str(v) for v in values], pa.string())
        raise TypeMismatchError(
            f"column {name!r} ({schema.type_of(name)}): its values do not form one type ({e})"
        ) from e


def _refuse_inexact_whole_decimals(name: str, values: list[Any], schema: TableSchema) -> None:
    """A ``Decimal`` written as an integer (``Decimal(2**53 + 1)``; not ``Decimal("1.0")``)
    beyond the integers a FLOAT or DOUBLE column holds exactly, refused as the same int or
    text is (it would be rounded)."""
    target = schema.type_of(name)
    if not pa.types.is_floating(target):
        return
    for value in values:
        if isinstance(value, decimal.Decimal) and inexact_integer(str(value), target):
            raise TypeMismatchError(inexact_integer_message(name, target, str(value)))


def _refuse_unstorable_decimals(name: str, values: list[Any], schema: TableSchema) -> None:
    """A ``Decimal`` no Arrow decimal holds (NaN, an infinity, more than 76 digits), named
    with the column's SQL type instead of Arrow's reason."""
    sql = arrow_to_sql_or_str(schema.type_of(name))
    for value in values:
        if not isinstance(value, decimal.Decimal):
            continue
        if not value.is_finite():
            raise TypeMismatchError(
                f"column {name!r} ({sql}): value {value} is no number {an(sql)} holds (no NaN or "
                "infinity); write NULL for a missing value"
            )
        # A zero is one digit whatever its exponent (Decimal("0E+76") is 0).
        digits = len(value.as_tuple().digits) + max(0, int(value.as_tuple().exponent))
        if digits > 76 and not value.is_zero():
            raise TypeMismatchError(
                f"column {name!r} ({sql}): value {value} does not fit: it has {digits} digits, "
                "more than any DECIMAL holds; convert the value before writing"
            )


def _refuse_invalid_unicode(name: str, values: list[Any], schema: TableSchema) -> None:
    """Text holding a lone surrogate (``"\\ud800"``, what a bad decoding with
    ``surrogateescape`` leaves) is no Unicode text any column stores."""
    for value in values:
        if not isinstance(value, str):
            continue
        try:
            value.encode("utf-8")
        except UnicodeEncodeError as e:
            sql = arrow_to_sql_or_str(schema.type_of(name))
            raise TypeMismatchError(
                f"column {name!r} ({sql}): text {value[:60]!r} is not valid Unicode (it holds "
                f"the lone surrogate {value[e.start]!r} at position {e.start}); decode the "
                "source's bytes with the right encoding before writing"
            ) from None


_MISSING_KINDS = frozenset({"NaTType", "NAType"})


def _missing(value: Any) -> bool:
    """Whether ``value`` is pandas' or numpy's mark of a missing value (``pd.NaT``, ``pd.NA``,
    a ``datetime64`` NaT), stored as NULL as from a DataFrame."""
    if type(value).__name__ in _MISSING_KINDS:
        return True
    return isinstance(value, np.datetime64 | np.timedelta64) and bool(np.isnat(value))


def _arrow_time_unit(value: Any) -> Any:
    """A numpy ``datetime64`` of minutes or hours in seconds, a unit Arrow converts (the same
    instant); any other value as it is."""
    if isinstance(value, np.datetime64) and np.datetime_data(value.dtype)[0] in ("m", "h"):
        return value.astype("datetime64[s]")
    return value


def _refuse_nanoseconds(name: str, values: list[Any], schema: TableSchema) -> None:
    """A pandas Timestamp with nanoseconds, which Arrow's conversion of Python datetimes would
    cut to microseconds: refused, as the same value from a DataFrame, numpy or text is."""
    for value in values:
        if getattr(value, "nanosecond", 0) and isinstance(value, dt.datetime):
            sql = arrow_to_sql_or_str(schema.type_of(name))
            raise TypeMismatchError(
                f"column {name!r} ({sql}): value {value!r} does not fit: {an(sql)} keeps "
                "microseconds and its nanoseconds are not zero; round the value to microseconds"
            )


def _kinds_apart(values: dict[str, list[Any]], table: pa.Table, schema: TableSchema) -> pa.Table:
    """The columns of an existing table whose Python values are of several kinds, converted
    kind by kind (:func:`_by_kind`): Arrow's inference converts a mix by its widest kind, so
    ``16777217`` beside ``0.5`` would become a double rounded into a FLOAT, ``True`` beside a
    float 1.0, text beside bytes bytes, each of them refused alone. VARCHAR columns take
    numbers and booleans as text instead (:func:`_numbers_as_text`)."""
    known = dict(schema.columns)
    for index, name in enumerate(table.column_names):
        column_values = values.get(name)
        if name not in known or column_values is None:
            continue
        target = schema.type_of(name)
        if target != pa.string() and _mixes_kinds(column_values, table.column(index), target):
            table = table.set_column(index, name, _by_kind(name, column_values, schema))
    return table


# Python kinds that Arrow converts, alone in a column, as they convert one by one.
_SINGLE_KINDS = frozenset({float, int, bool, str, bytes, decimal.Decimal, dt.date, dt.datetime})


def _mixes_kinds(values: list[Any], column: pa.ChunkedArray, target: pa.DataType) -> bool:
    """Whether ``values`` may convert otherwise together than alone. A column Arrow read as
    booleans or text holds one kind (Arrow refuses numbers among text); one read as integers
    may hide a numpy bool among ints (a 0 or 1 is looked at). One read as doubles is checked
    only where a mix could show, so a column of floats costs a vectorised pass: a bool is 0.0
    or 1.0, and an int is held by a FLOAT as it is within 2**24 (an int beyond 2**53 Arrow
    refuses among floats); into a DECIMAL, a numpy float32 among floats would be taken by its
    double's digits, so every value is looked at."""
    source = column.type
    if pa.types.is_integer(source):
        # Arrow refuses Python bools among ints but reads numpy's np.True_ as 1: a 0 or a 1
        # that is no plain int is looked at apart.
        if len(values) <= _FEW_VALUES:
            return any(
                type(values[i]) is not int
                for i, read in enumerate(column.to_pylist())
                if read is not None and -1 <= read <= 1
            )
        suspects = pc.fill_null(pc.less_equal(pc.abs(column), 1), False)
        return _suspect_of_other_kind(values, suspects, int)
    if pa.types.is_boolean(source) or _is_text(source):
        return False
    if pa.types.is_float64(source) and not pa.types.is_decimal(target):
        # Into an integer column a numpy float32 or float16 among doubles is refused alone
        # from 2**24 or 2**11 (it may have been rounded): from 2**11 a value is looked at.
        large = 2.0**24 if target == pa.float32() else None
        if pa.types.is_integer(target):
            large = float(min(FLOAT_EXACT_INTEGERS.values())) - 0.5
        if len(values) <= _FEW_VALUES:
            return any(
                type(values[i]) is not float
                for i, read in enumerate(column.to_pylist())
                if read is not None
                and (read in (0.0, 1.0) or (large is not None and abs(read) > large))
            )
        suspects = pc.or_(pc.equal(column, 0.0), pc.equal(column, 1.0))
        if large is not None:
            suspects = pc.or_(suspects, pc.greater(pc.abs(column), large))
        return _suspect_of_other_kind(values, pc.fill_null(suspects, False), float)
    kinds = set(map(type, values))
    kinds.discard(type(None))
    return len(kinds) > 1 or not kinds <= _SINGLE_KINDS


# Up to this many values, a column's suspects are found by reading its values back into Python:
# cheaper than the few Arrow calls that find them in a large column.
_FEW_VALUES = 64


def _suspect_of_other_kind(
    values: list[Any], suspects: pa.ChunkedArray | pa.Array, kind: type
) -> bool:
    """Whether a value at a position ``suspects`` marks is of another Python type than
    ``kind``: the marked values are picked in one call and their types gathered in one set, as
    a column of small counts can mark a fifth of its rows."""
    if not pc.any(suspects).as_py():
        return False
    if isinstance(suspects, pa.ChunkedArray):
        suspects = suspects.combine_chunks()
    where = pc.indices_nonzero(suspects).to_numpy().tolist()
    if len(where) == 1:
        return type(values[where[0]]) is not kind
    return set(map(type, operator.itemgetter(*where)(values))) != {kind}


def separator_hint(unknown: list[str], schema: TableSchema) -> str:
    """Advice for a header read as one name because the file separates its fields with another
    character than a comma (``id;name;amount``): the pieces name the table's columns."""
    known = {n.lower() for n in schema.names}
    for name in unknown:
        for separator in (";", "\t", "|"):
            pieces = [p.strip().strip('"').lower() for p in name.split(separator)]
            if len(pieces) > 1 and sum(p in known for p in pieces) >= 2:
                shown = "a tab" if separator == "\t" else repr(separator)
                return (
                    f" The header {name!r} looks separated by {shown}, not commas: CSV files "
                    "are read with commas; convert the file (e.g. pandas.read_csv(path, "
                    f"sep={separator!r}), then insert the frame)."
                )
    return ""


NEW_COLUMN_ADVICE = "Pass evolve_schema=True to add {columns} as new nullable columns"


def conform(
    table: pa.Table,
    schema: TableSchema,
    *,
    key_columns: Iterable[str] = (),
    allow_new_columns: bool = False,
    require_all_keys: bool = True,
    new_column_advice: str = NEW_COLUMN_ADVICE,
) -> tuple[pa.Table, TableSchema]:
    """Check user data against the schema and cast it to the table's types.

    Returns the data with the (possibly evolved) schema's user columns present in the input,
    in schema order, and the schema to commit. Raises before anything is written. An unknown
    column's error ends with ``new_column_advice``, its ``{columns}`` the names that could be
    added (a caller that cannot evolve the schema gives its own way).
    """
    check_data_names(table.column_names)
    present = [n for n in table.column_names if n not in RESERVED]
    for reserved in sorted(RESERVED & set(table.column_names)):
        raise SchemaError(
            f"column {reserved!r} is a system column the ledger assigns; drop it from the data "
            "(append_entries takes dml_type; tables without a primary key take _row_id in "
            "update and delete)"
        )
    known = set(schema.names)
    unknown = [n for n in present if n not in known]
    target_schema = schema
    if unknown and not allow_new_columns:
        hint = _case_hint(unknown, schema) + separator_hint(unknown, schema)
        nested = [n for n in unknown if pa.types.is_nested(table.schema.field(n).type)]
        if nested:
            hint += f" Column(s) {_nested_advice(nested)}."
        new_columns = [
            n
            for n in unknown
            if not _spelling_of(n, schema)
            and n.strip()
            and not separator_hint([n], schema)
            and n not in nested
        ]
        if nested:
            new_columns = []  # adding the others cannot make the write work
        evolve = " " + new_column_advice.format(columns=new_columns) if new_columns else ""
        raise UnknownColumnError(
            f"unknown column(s) {unknown}; the table has {schema.names}.{hint}{evolve}"
        )
    if allow_new_columns:
        # New columns join the schema; an existing column widens only if its values do not fit
        # its current type (Python ints arrive as int64, which must not widen an INTEGER column).
        # A new column holding only missing values has no type of its own, whatever its dtype
        # says (pandas reads an empty text column as NaN floats): refused as Arrow's null.
        evolving = [
            pa.field(f.name, pa.null())
            if f.name not in known and _is_all_missing(table.column(f.name))
            else f
            for f in table.select(present).schema
            if f.name not in known or not _converts(f.name, table.column(f.name), schema)
        ]
        target_schema = schema.evolve(pa.schema(evolving))
    key_list = list(key_columns)
    if require_all_keys:
        missing = [k for k in key_list if k not in table.column_names]
        if missing:
            raise MissingKeyError(f"primary-key column(s) {missing} missing from the data")
    columns = []
    names = []
    for name in target_schema.names:
        if name not in table.column_names:
            continue
        target = target_schema.type_of(name)
        column = table.column(name)
        converted = _cast_column(name, column, target)
        _check_calendar_range(name, converted)
        columns.append(converted)
        names.append(name)
    out = (
        pa.table(columns, names=names)
        if names
        else pa.table({"__n": pa.nulls(table.num_rows)}).drop(["__n"])
    )
    for key in key_list:
        if key in out.column_names and out.column(key).null_count:
            raise MissingKeyError(
                f"primary-key column {key!r} holds NULL in {out.column(key).null_count} row(s); "
                "every row needs a complete key"
            )
    return out, target_schema


def check_data_names(names: Sequence[str]) -> None:
    """Data must name each column once: two columns whose names differ only in case (or not at
    all) would reach the same column of the table."""
    seen: dict[str, str] = {}
    for name in names:
        folded = folded_name(name)
        if folded in seen:
            what = (
                f"column {name!r} twice"
                if seen[folded] == name
                else f"columns {seen[folded]!r} and {name!r}, which differ only in case"
            )
            raise SchemaError(
                f"the data has {what}: column names are compared without case, so each "
                "column may appear only once; rename or drop one of them"
            )
        seen[folded] = name


def _nested_advice(names: Sequence[str]) -> str:
    """Why columns holding nested values (JSON objects or lists, Arrow structs, lists and maps)
    cannot be added, and what to do instead."""
    return (
        f"{', '.join(map(repr, names))} hold(s) nested values (objects or lists), which no "
        "column type takes: flatten each field into a column of its own (in the source, or "
        f"with an insert transform reading {names[0]}.<field> AS a column of the table), or "
        f"leave the field{'s' if len(names) > 1 else ''} {', '.join(map(repr, names))} out of "
        "the data"
    )


def _case_hint(unknown: Sequence[str], schema: TableSchema) -> str:
    """Point out a name that differs from a table column only in case or in surrounding spaces
    (names are matched exactly, so ``"ID"`` or ``" amount"`` from a CSV header written as
    ``id, amount`` does not write ``"id"`` or ``"amount"``), and a column without a name (the
    row numbers pandas' ``to_csv`` writes by default)."""
    close = [f"{n!r} -> {_spelling_of(n, schema)!r}" for n in unknown if _spelling_of(n, schema)]
    hints = []
    if close:
        hints.append(
            " Column names are matched exactly, spaces and case included: use the table's "
            f"spelling ({', '.join(close)})."
        )
    if any(not n.strip() for n in unknown):
        hints.append(
            " A column has no name: a CSV written by pandas' to_csv holds the frame's row "
            "numbers in an unnamed first column; write it with index=False."
        )
    return "".join(hints)


def _spelling_of(name: str, schema: TableSchema) -> str | None:
    """The table column ``name`` differs from only in case or surrounding spaces."""
    by_fold = {folded_name(n): n for n in schema.names}
    return by_fold.get(folded_name(name.strip()))


def _converts(name: str, column: pa.ChunkedArray, schema: TableSchema) -> bool:
    try:
        _cast_column(name, column, schema.type_of(name))
    except TypeMismatchError:
        return False
    return True


def _unfit_message(name: str, source: pa.DataType, target: pa.DataType) -> str:
    sql = arrow_to_sql_or_str(target)
    if pa.types.is_timestamp(target) and target.tz is not None:
        if pa.types.is_timestamp(source) or pa.types.is_date(source):
            held = "timestamps without zone" if pa.types.is_timestamp(source) else "dates"
        else:
            held = f"{arrow_to_sql_or_str(source)} values"
        return (
            f"column {name!r} is {sql} but the data holds {held}; {an(sql)} column stores "
            "instants, so its values need a time zone: attach one first (a datetime with "
            "tzinfo, replace(tzinfo=...), tz_localize in pandas), or make the column TIMESTAMP"
        )
    return (
        f"column {name!r} is {sql} but the data holds {source}; convert the column before writing"
    )


def _cast_column(name: str, column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    source = column.type
    if source == target:
        return column
    if pa.types.is_dictionary(source):
        column = column.cast(source.value_type)
        source = column.type
    if _is_all_missing(column) or (
        not len(column) and (pa.types.is_null(source) or pa.types.is_floating(source))
    ):
        # No value of the wrong type: an empty pandas column is float64 (or object, read as
        # Arrow's null type) whatever the data it would hold, as its missing values are.
        return pa.chunked_array([pa.nulls(len(column), target)], target)
    if pa.types.is_timestamp(source) and pa.types.is_date(target):
        return midnight_dates(name, column, target)
    if not _fits(source, target):
        raise TypeMismatchError(_unfit_message(name, source, target))
    if _is_text(source) and _parsed_from_text(target):
        return parse_text(name, column, target)
    if pa.types.is_floating(source) and pa.types.is_decimal(target):
        return _float_to_decimal(name, column, target)
    if pa.types.is_floating(source) and pa.types.is_integer(target):
        _refuse_floats_beyond_exact_integers(name, column, target)
    if pa.types.is_integer(source) and pa.types.is_floating(target):
        _refuse_inexact_integers(name, column, target)
    if pa.types.is_decimal(source) and pa.types.is_floating(target):
        # Arrow's decimal -> float cast scales by a rounded power of ten (Decimal("0.10") became
        # the FLOAT 0.099999994, while Decimal("0.100") became 0.1): the decimal's digits are
        # parsed instead, correctly rounded to a double, then cast as a double is.
        doubles = column.cast(pa.string()).cast(pa.float64())
        return doubles if target == pa.float64() else _cast_column(name, doubles, target)
    try:
        if pa.types.is_integer(source) and pa.types.is_decimal(target):
            # Arrow sizes int -> decimal casts for the widest integer (19 digits plus the
            # scale, too many for DECIMAL(38,20)); go through 38 whole digits and let the final
            # safe cast check that each value fits the column's precision and scale.
            column = column.cast(pa.decimal128(38, 0))
        if pa.types.is_decimal(target) and pa.types.is_decimal(column.type):
            _check_whole_digits(name, column, target)
        converted = column.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        row = _first_failing(column, lambda part: part.cast(target, safe=True))
        bad = column[row].as_py()
        if isinstance(bad, decimal.Decimal) and pa.types.is_decimal(target):
            # The refusal text gets for the same number (Arrow says only "Rescaling Decimal
            # value would cause data loss").
            refusal = decimal_text_refusal(f"{bad:f}", target)
            if refusal is not None:
                raise TypeMismatchError(
                    f"column {name!r} ({arrow_to_sql_or_str(target)}), {named_row(row)}: "
                    f"{refusal} before writing"
                ) from None
        if pa.types.is_integer(target) and type(bad) is int:
            sql = arrow_to_sql_or_str(target)
            low, high = _INTEGER_RANGE[target]
            raise TypeMismatchError(
                f"column {name!r} ({sql}), {named_row(row)}: value {bad} is out of its range "
                f"({an(sql)} holds {low} to {high}); widen the column or fix the value before "
                "writing"
            ) from None
        if pa.types.is_floating(source) and pa.types.is_integer(target) and type(bad) is float:
            # Arrow's words name a half float by its bits ("Float value 15872 was truncated").
            sql = arrow_to_sql_or_str(target)
            low, high = _INTEGER_RANGE[target]
            problem = (
                f"is out of its range ({an(sql)} holds {low} to {high}); widen the column or "
                "fix the value"
                if math.isfinite(bad) and bad.is_integer()
                else "is not a whole number (an integer column takes whole numbers); round or "
                "fix the value, or make the column DOUBLE or DECIMAL,"
            )
            raise TypeMismatchError(
                f"column {name!r} ({sql}), {named_row(row)}: value {bad!r} {problem} before writing"
            ) from None
        whole = (
            " (an integer column takes whole numbers within its range)"
            if pa.types.is_floating(source) and pa.types.is_integer(target)
            else ""
        )
        raise TypeMismatchError(
            f"column {name!r} ({arrow_to_sql_or_str(target)}): value {bad!r} does not fit{whole} "
            f"({e})"
        ) from e
    _check_lossless(name, column, converted, target)
    return converted


_INTEGER_RANGE = {
    kind: (-(2 ** (kind.bit_width - 1)), 2 ** (kind.bit_width - 1) - 1)
    if pa.types.is_signed_integer(kind)
    else (0, 2**kind.bit_width - 1)
    for kind in (
        pa.int8(),
        pa.int16(),
        pa.int32(),
        pa.int64(),
        pa.uint8(),
        pa.uint16(),
        pa.uint32(),
        pa.uint64(),
    )
}


def an(sql: str) -> str:
    """A SQL type name after its indefinite article: ``an INTEGER``, ``a BIGINT``, ``a
    UBIGINT`` (said "you")."""
    return ("an " if sql[:1] in "AEIO" else "a ") + sql


def named_row(row: int) -> str:
    """How a refusal of in-memory data (Arrow, pandas) names the row of its value."""
    return f"row {row} (counted from 0)"


_NAMED_ROW = re.compile(r"\brow (\d+) \(counted from 0\)")


def renumbered_refusal(refused: TypeMismatchError, rows_before: int) -> TypeMismatchError | None:
    """``refused``, raised for a part of the data that starts ``rows_before`` rows into it,
    naming its value's row in the whole data instead of in the part; None when it names no
    row (or the part is the start of the data).

    >>> renumbered_refusal(TypeMismatchError("column 'd', row 3 (counted from 0): ..."), 8)
    TypeMismatchError("column 'd', row 11 (counted from 0): ...")
    """
    message = str(refused)
    renumbered = _NAMED_ROW.sub(lambda found: named_row(int(found[1]) + rows_before), message)
    if not rows_before or renumbered == message:
        return None
    return TypeMismatchError(renumbered)


def _is_all_missing(column: pa.ChunkedArray) -> bool:
    """A column holding only NULLs, whatever its type: Arrow's null type, floats (how pandas
    holds a column of NaN or None, as ``read_csv`` reads an empty text column), or any other
    (a pandas column of NaT without a zone, of ``pd.NA`` in ``Int64`` or ``string``). It holds
    no value of the wrong type, so it goes into a column of any type as NULLs (a key column
    still refuses them)."""
    return bool(len(column) and column.null_count == len(column))


def _check_whole_digits(name: str, column: pa.ChunkedArray, target: pa.DataType) -> None:
    """Refuse decimals with more whole digits than the column's precision leaves before its
    scale: Arrow's rescaling of such a decimal wraps around instead of failing."""
    source = column.type
    whole_digits = target.precision - target.scale
    if source.precision - source.scale <= whole_digits:
        return  # every value of the source type fits (the scale is checked by the cast)
    limit = pa.scalar(10**whole_digits, source)  # compared in the source's own type
    beyond = pc.or_(pc.greater_equal(column, limit), pc.less_equal(column, pc.negate(limit)))
    if pc.any(beyond).as_py():
        bad = column[pc.index(beyond, True).as_py()].as_py()
        raise TypeMismatchError(
            f"column {name!r} ({arrow_to_sql_or_str(target)}): value {bad} does not fit: it "
            f"has more than {target.precision - target.scale} whole digit(s); widen the column"
        )


# The integers a float holds exactly: every integer of smaller magnitude is a float of its own.
FLOAT_EXACT_INTEGERS = {pa.float16(): 2**11, pa.float32(): 2**24, pa.float64(): 2**53}


def float_text_message(name: str, target: pa.DataType, text: str) -> str:
    """Why a number written as a float (with a point or an exponent: ``9007199254740992.0``,
    as pandas writes an integer column holding NaN) is refused by integer column ``name``
    from 2**53: a float that large may already have been rounded, as from every source."""
    return (
        f"column {name!r} ({arrow_to_sql_or_str(target)}): {text} is written as a float (with a "
        "point or an exponent), and a float holds whole numbers exactly only below 2**53, so it "
        "may already have been rounded; write the integer as plain digits (in pandas, read or "
        'convert the column as dtype "Int64" before writing it out)'
    )


def _refuse_floats_beyond_exact_integers(
    name: str, column: pa.ChunkedArray, target: pa.DataType
) -> None:
    """A float of 2**53 or more (2**24 for a FLOAT) no longer tells neighbouring integers
    apart, so a whole number that large may already have been rounded before it got here:
    pandas reads an integer column with a gap as float64, and 9007199254740993 becomes
    9007199254740992.0. Storing it would store a value other than the one the source held,
    so it is refused, as an integer beyond 2**53 is refused by a DOUBLE column."""
    limit = FLOAT_EXACT_INTEGERS[column.type]
    values = column.cast(pa.float64())  # exact; Arrow's kernels take no half floats
    # NaN and infinities are no whole numbers: the cast below refuses them.
    large = pc.and_(pc.is_finite(values), pc.greater_equal(pc.abs(values), float(limit)))
    beyond = pc.fill_null(large, False)
    if not pc.any(beyond).as_py():
        return
    bad = column[pc.index(beyond, True).as_py()].as_py()
    exponent = limit.bit_length() - 1
    raise TypeMismatchError(
        f"column {name!r} ({arrow_to_sql_or_str(target)}): the float {bad!r} may already have "
        f"been rounded (a float holds whole numbers exactly only below 2**{exponent}); give "
        'the column as integers (in pandas, read or convert it as dtype "Int64")'
    )


def _refuse_inexact_integers(name: str, column: pa.ChunkedArray, target: pa.DataType) -> None:
    """Integers beyond those float column ``name`` holds exactly, refused in the words the same
    integer gets from a file (Arrow's cast says only that it is not in range)."""
    limit = FLOAT_EXACT_INTEGERS[target]
    if column.type.bit_width < limit.bit_length():
        return
    magnitudes = pc.abs_checked(column.cast(pa.decimal128(20, 0)))  # no overflow at -2**63
    beyond = pc.fill_null(pc.greater(magnitudes, limit), False)
    if pc.any(beyond).as_py():
        bad = column[pc.index(beyond, True).as_py()].as_py()
        raise TypeMismatchError(inexact_integer_message(name, target, str(bad)))


def _float_to_decimal(name: str, column: pa.ChunkedArray, target: pa.DataType) -> pa.ChunkedArray:
    """A float goes into a DECIMAL as its shortest text, the digits ``repr`` prints (Arrow
    prints floats that way): ``24.08`` is stored as 24.08, the decimal nearest to the float
    that reads back as the same float. Floats whose text has more decimal places than the
    scale (they would be rounded) or more digits than the precision, NaN and infinities are
    refused. Arrow's own float -> decimal cast is not correctly rounded, so it cannot decide."""
    text = _shortest_texts(column)
    # Arrow's rescaling of the text wraps around instead of failing when the step is too
    # large (1e-39 into DECIMAL(38,0) becomes 0, 1e16 into DECIMAL(38,32) some other number),
    # so values outside the column's range are caught first: a nonzero float below the
    # scale's smallest step, or one with more whole digits than the precision leaves. Inside
    # that range the rescaling is exact. The bounds are rounded to the column's own float
    # type, whose values are compared with them: the FLOAT nearest to 1e-4 (below 1e-4, and
    # written "0.0001") is the smallest step of scale 4, as 1e-4 is of a DOUBLE.
    numbers = column.cast(pa.float64())  # exact; Arrow has no abs() for half floats
    magnitude = pc.abs(numbers)
    smallest = _rounded_to(10.0**-target.scale, column.type)
    largest = _rounded_to(10.0 ** (target.precision - target.scale), column.type)
    outside = pc.or_(
        pc.and_(pc.less(magnitude, smallest), pc.not_equal(numbers, 0)),
        pc.greater_equal(magnitude, largest),
    )
    if pc.any(outside).as_py():
        raise _unfit_float(name, text[pc.index(outside, True).as_py()].as_py(), target)
    try:
        converted: pa.ChunkedArray = text.cast(target, safe=True)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        bad = text[_first_failing(text, lambda part: part.cast(target, safe=True))].as_py()
        raise _unfit_float(name, bad, target) from e
    return converted


def _rounded_to(value: float, float_type: pa.DataType) -> float:
    """``value`` rounded to the nearest value of an Arrow float type (infinity beyond it)."""
    with np.errstate(over="ignore"):
        return float(np.array(value, dtype=float_type.to_pandas_dtype()))


def _shortest_texts(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """Each float as its shortest text in its own type (``0.1``, not the digits of its double).
    Arrow prints FLOAT and DOUBLE values so; a half float it prints with all its double's
    digits, so numpy, which prints every float type shortest, writes those."""
    if column.type != pa.float16():
        return column.cast(pa.string())
    chunks = []
    for chunk in column.chunks:
        texts = chunk.to_numpy(zero_copy_only=False).astype(str)
        missing = chunk.is_null().to_numpy(zero_copy_only=False)
        chunks.append(pa.array(texts, pa.string(), mask=missing))
    return pa.chunked_array(chunks, pa.string())


def _unfit_float(name: str, text: str, target: pa.DataType) -> TypeMismatchError:
    sql = arrow_to_sql_or_str(target)
    return TypeMismatchError(
        f"column {name!r} ({sql}): the float {text} does not fit exactly: {an(sql)} keeps "
        f"{target.scale} decimal place(s) and {target.precision} digit(s) and no NaN or "
        f"infinity; round the value to {target.scale} place(s) or widen the column before writing"
    )


_CALENDAR_DAYS = (-719162, 2932896)  # 0001-01-01 and 9999-12-31, in days since 1970-01-01


def _check_calendar_range(name: str, column: pa.ChunkedArray) -> None:
    """Dates and timestamps must lie in years 1 to 9999, the range every engine and the log's
    ISO text can represent."""
    if not (pa.types.is_date(column.type) or pa.types.is_timestamp(column.type)):
        return
    days = pc.cast(column, pa.date32(), safe=False).cast(pa.int32())
    bounds = pc.min_max(days)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    if low is None:
        return
    if low < _CALENDAR_DAYS[0] or high > _CALENDAR_DAYS[1]:
        raise TypeMismatchError(
            f"column {name!r}: a date outside the years 1 to 9999 does not fit "
            f"({arrow_to_sql_or_str(column.type)} values are kept within that range)"
        )


# A FLOAT rounds a value by at most this fraction of it, within its normal range.
FLOAT_RELATIVE_ERROR = 2.0**-24


def _check_lossless(
    name: str, column: pa.ChunkedArray, converted: pa.ChunkedArray, target: pa.DataType
) -> None:
    """Arrow's safe casts overflow doubles into float infinities and underflow them to zero
    without complaint; a ledger must not store a value other than the one given.

    A double going into a FLOAT may be rounded to the nearest FLOAT, which keeps the value to
    within 2**-24 of itself; a result farther off (infinity, zero, or a subnormal FLOAT that
    kept only a few bits of the value) is refused."""
    source = column.type
    if not (pa.types.is_floating(source) and target == pa.float32()):
        return
    original = column.cast(pa.float64())
    error = pc.abs(pc.subtract(converted.cast(pa.float64()), original))
    # NaN and infinities compare false here: they are kept as they are.
    changed = pc.fill_null(
        pc.greater(error, pc.multiply(pc.abs(original), FLOAT_RELATIVE_ERROR)), False
    )
    if pc.any(changed).as_py():
        index = pc.index(changed, True).as_py()
        bad, stored = column[index].as_py(), converted[index].as_py()
        raise TypeMismatchError(
            f"column {name!r} (FLOAT): value {bad!r} does not fit, a FLOAT would hold it as "
            f"{stored!r} (FLOAT keeps magnitudes from about 1.2e-38 to 3.4e38 to 7 digits); "
            "make the column DOUBLE or convert the value before writing"
        )


def _first_failing(column: pa.ChunkedArray, cast: Callable[[pa.ChunkedArray], object]) -> int:
    """The index of the first value ``cast`` fails on, given that it fails on ``column``: by
    halving, so a million rows cost two vectorised passes, not a million calls."""
    low, high = 0, len(column)  # the failing value lies in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        try:
            cast(column.slice(low, middle - low))
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            high = middle
        else:
            low = middle
    return low


def arrow_to_sql_or_str(data_type: pa.DataType) -> str:
    try:
        return arrow_to_sql(data_type)
    except SchemaError:
        return str(data_type)
