"""Partition specs: column names or simple transforms, and safe partition paths.

A spec is a list of strings::

    ["region"]                      identity of a column
    ["day(event_time)"]             year(...), month(...), day(...), hour(...) of a DATE/TIMESTAMP
    ["bucket(16, user_id)"]         crc32 of the value's text, modulo 16

Partition values are strings (or None). In paths they are percent-escaped so no value can
leave the table's directory (``../``, ``/``, ``=``, NUL and unicode all turn into ``%XX``).

Escaping can make a segment several times longer than its value, and file systems cap one path
segment (255 bytes on Linux) as S3 caps a whole key (1024 bytes). A segment longer than
:data:`SEGMENT_LIMIT` bytes, and the longest segments of a path longer than :data:`PATH_LIMIT`,
hold a hash of the value instead (``~<sha256 hex>``); the exact value is in the file marker's
``part``, where readers take it from. So any value fits.
"""

from __future__ import annotations

import datetime as dt
import decimal
import hashlib
import re
import zlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ledger.arguments import INT64_MAX
from ledger.errors import InvalidArgumentError
from ledger.schema import CONVERSION_ERRORS, TableSchema, folded_name

NULL_PARTITION = "__null__"
# Bytes of one ``name=value`` path segment (local file systems allow 255 per segment) and of the
# whole partition path (S3 allows 1024 bytes per key, warehouse prefix and file name included).
SEGMENT_LIMIT = 200
PATH_LIMIT = 512
# Marks a segment holding a hash: escaped values never contain "~".
HASHED_PREFIX = "~"
_SAFE = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-")
_TIME_FORMATS = {"year": "%Y", "month": "%Y-%m", "day": "%Y-%m-%d", "hour": "%Y-%m-%d-%H"}
_TRANSFORM = re.compile(r"^\s*(\w+)\s*\(\s*(.+?)\s*\)\s*$")


@dataclass(frozen=True)
class PartitionField:
    """One partition column: ``transform(source)`` named ``name``."""

    name: str
    transform: str  # identity | year | month | day | hour | bucket
    source: str
    buckets: int | None = None
    # The source column's type (Arrow and SQL spelling): what an identity field's values are.
    source_type: pa.DataType | None = field(default=None, compare=False, repr=False)
    source_sql: str = field(default="", compare=False, repr=False)

    @property
    def spec(self) -> str:
        if self.transform == "identity":
            return self.source
        if self.transform == "bucket":
            return f"bucket({self.buckets}, {self.source})"
        return f"{self.transform}({self.source})"

    def values(self, table: pa.Table) -> pa.Array:
        """The partition value of every row, as strings (None for NULL)."""
        return self._transform(table.column(self.source).combine_chunks())

    def ranked_values(self, table: pa.Table) -> tuple[pa.Array, pa.Array]:
        """The distinct partition values of ``table``'s rows in ascending order (NULL last), and
        each row's index among them.

        Only the column's distinct values are transformed (a bucket hashed, a day formatted)
        and ranked; one hashing pass over the rows finds those values and each row's among
        them (a dictionary encoding, NULL one of its values).
        """
        column = table.column(self.source).combine_chunks()
        encoded = pc.dictionary_encode(column, null_encoding="encode")
        if self.transform == "bucket" and self.buckets:
            return self._ranked_buckets(encoded)
        texts = self._transform(encoded.dictionary)
        distinct = pc.unique(texts)
        distinct = distinct.take(pc.sort_indices(distinct))
        rank_of_unique = pc.index_in(texts, value_set=distinct)
        return distinct, rank_of_unique.take(encoded.indices)

    def _ranked_buckets(self, encoded: pa.DictionaryArray) -> tuple[pa.Array, pa.Array]:
        """:meth:`ranked_values` of a bucket: each distinct value's bucket number is hashed
        once, and the few buckets present are ranked by their text in Python, so no text is
        made, hashed or looked up per distinct value beyond its hash."""
        values = encoded.dictionary
        count = int(self.buckets or 0)
        buckets = crc32_of_texts(canonical_text(values)).astype(np.int64) % count
        nulls = values.is_null().to_numpy(zero_copy_only=False)
        texts = sorted(str(b) for b in np.unique(buckets[~nulls]).tolist())
        rank_of_bucket = np.zeros(count, dtype=np.int32)
        rank_of_bucket[[int(text) for text in texts]] = np.arange(len(texts), dtype=np.int32)
        ranks = rank_of_bucket[buckets]
        ranks[nulls] = len(texts)  # NULL ranks last
        distinct = pa.array([*texts, *([None] if nulls.any() else [])], pa.string())
        return distinct, pa.array(ranks[encoded.indices.to_numpy()])

    def _transform(self, column: pa.Array) -> pa.Array:
        if self.transform == "identity":
            return canonical_text(column)
        if self.transform in _TIME_FORMATS:
            if pa.types.is_date(column.type):
                column = column.cast(pa.timestamp("s"))
            return pc.strftime(in_utc(column), format=_TIME_FORMATS[self.transform])
        if self.transform != "bucket" or not self.buckets:
            raise InvalidArgumentError(f"unknown partition transform {self.transform!r}")
        # Each distinct value is hashed once, in one vectorised pass over its canonical text.
        uniques = pc.unique(column)
        hashes = crc32_of_texts(canonical_text(uniques))
        buckets = pa.array(hashes % np.uint64(self.buckets)).cast(pa.string())
        bucket_of = pc.if_else(pc.is_null(uniques), pa.scalar(None, pa.string()), buckets)
        return pc.take(bucket_of, pc.index_in(column, value_set=uniques))

    def value_of(self, value: Any) -> str | None:
        """The partition value of one source value (for pruning by source value)."""
        return self.values(pa.table({self.source: [value]})).to_pylist()[0]  # type: ignore[no-any-return]


def _crc32_table() -> np.ndarray[Any, np.dtype[np.uint32]]:
    """The byte table of the CRC-32 that zlib computes (reflected polynomial 0xEDB88320)."""
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(0xEDB88320), table >> 1)
    return table.astype(np.uint32)


_CRC32_TABLE = _crc32_table()
# Values longer than this many bytes are hashed one by one (see crc32_of_texts).
_VECTOR_CRC_BYTES = 64


def crc32_of_texts(texts: pa.Array) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """``zlib.crc32`` of each value's UTF-8 bytes (0 for NULL), for a whole string array at once.

    The bytes are consumed one position at a time across every value still that long (values
    ordered longest first, so those are a prefix), so the Python loop runs once per byte of the
    longest value, not once per value.

    >>> int(crc32_of_texts(pa.array(["ledger"]))[0]) == zlib.crc32(b"ledger")
    True
    """
    texts = texts.cast(pa.large_string())  # 64-bit offsets, whatever the input's size
    count = len(texts)
    if count == 0:
        return np.zeros(0, dtype=np.uint64)
    _, offsets_buffer, data_buffer = texts.buffers()
    offsets = np.frombuffer(offsets_buffer, dtype=np.int64)[texts.offset : texts.offset + count + 1]
    data = (
        np.frombuffer(data_buffer, dtype=np.uint8)
        if data_buffer is not None
        else np.zeros(0, dtype=np.uint8)
    )
    lengths = np.diff(offsets)
    if texts.null_count:
        lengths = np.where(texts.is_null().to_numpy(zero_copy_only=False), 0, lengths)
    # A few long values would make the loop long: zlib takes them one by one.
    long_values = np.nonzero(lengths > _VECTOR_CRC_BYTES)[0]
    lengths[long_values] = 0
    order = np.argsort(-lengths, kind="stable")
    starts = offsets[:-1][order]
    sorted_lengths = lengths[order]
    crc = np.full(count, 0xFFFFFFFF, dtype=np.uint32)
    longest = int(sorted_lengths[0])
    # How many values are longer than each position: the prefix still being consumed.
    active = np.searchsorted(-sorted_lengths, -np.arange(longest), side="left")
    for position in range(longest):
        n = int(active[position])
        state = crc[:n]
        byte = data[starts[:n] + position]
        crc[:n] = _CRC32_TABLE[(state ^ byte) & 0xFF] ^ (state >> 8)
    result = np.empty(count, dtype=np.uint64)
    result[order] = crc ^ np.uint32(0xFFFFFFFF)
    if texts.null_count:
        result[texts.is_null().to_numpy(zero_copy_only=False)] = 0
    for index in long_values.tolist():
        result[index] = zlib.crc32(data[offsets[index] : offsets[index + 1]].tobytes())
    return result


def in_utc(column: pa.Array) -> pa.Array:
    """Timestamps with a time zone as UTC wall-clock time (how the table stores them), so a
    value given with another zone names the partition its row is in."""
    if pa.types.is_timestamp(column.type) and column.type.tz is not None:
        return column.cast(pa.timestamp(column.type.unit, tz="UTC"))
    return column


def canonical_text(column: pa.Array) -> pa.Array:
    """Values as text the same way in every engine: ISO dates, decimal integers, true/false."""
    if pa.types.is_timestamp(column.type):
        return pc.strftime(in_utc(column), format="%Y-%m-%dT%H:%M:%S")
    if pa.types.is_boolean(column.type):
        return pc.if_else(column, "true", "false")
    return column.cast(pa.string())


@dataclass(frozen=True)
class PartitionSpec:
    """The table's partition fields, in path order."""

    fields: tuple[PartitionField, ...] = ()

    @staticmethod
    def parse(specs: Sequence[str] | str | None, schema: TableSchema) -> PartitionSpec:
        if specs is None:
            return PartitionSpec()
        if isinstance(specs, str):
            specs = [specs]
        fields = [_parse_field(s, schema) for s in specs]
        names = [f.name for f in fields]
        if len(set(names)) != len(names):
            raise InvalidArgumentError(f"partition fields repeat a name: {names}")
        return PartitionSpec(tuple(fields))

    @property
    def names(self) -> list[str]:
        return [f.name for f in self.fields]

    @property
    def sources(self) -> set[str]:
        return {f.source for f in self.fields}

    def to_json(self) -> list[str]:
        return [f.spec for f in self.fields]

    def path(self, values: Mapping[str, str | None]) -> str:
        """``name=value/...`` with each value escaped (or hashed, when too long for a path);
        empty for an unpartitioned table."""
        segments = [f"{f.name}={escape(values[f.name])}" for f in self.fields]
        hashed = [f"{f.name}={hashed_segment(values[f.name])}" for f in self.fields]
        for i, segment in enumerate(segments):
            if _size(segment) > SEGMENT_LIMIT:
                segments[i] = hashed[i]
        # Longest first, until the whole path fits.
        for i in sorted(range(len(segments)), key=lambda i: -_size(segments[i])):
            if _size("/".join(segments)) <= PATH_LIMIT:
                break
            segments[i] = min(segments[i], hashed[i], key=_size)
        path = "/".join(segments)
        if _size(path) > PATH_LIMIT:
            raise InvalidArgumentError(self._too_long_message())
        return path

    def check_fits(self) -> None:
        """Raise unless every partition value fits in a path: hashed values always fit one
        segment, so only many long field names can overflow a path."""
        if _size("/".join(f"{f.name}={hashed_segment('')}" for f in self.fields)) > PATH_LIMIT:
            raise InvalidArgumentError(self._too_long_message())

    def _too_long_message(self) -> str:
        return (
            f"partition fields {self.names} make partition paths longer than {PATH_LIMIT} "
            "bytes; partition by fewer columns, or by columns with shorter names"
        )

    def normalise_filter(
        self, partitions: Mapping[str, Any] | Iterable[Mapping[str, Any]]
    ) -> list[dict[str, set[str | None]]]:
        """Turn user partition filters into sets of canonical values per field.

        ``{"ts_day": "2026-11-21"}``, ``{"ts_day": ["2026-11-20", "2026-11-21"]}`` or a list of
        such dicts (OR-ed, so an empty list selects nothing). Values may also be dates or
        datetimes; they are formatted as the partition formats them. A mapping naming no field
        is refused (it would otherwise read as every partition while ``[]`` is none), as is
        text no partition of its field can have (``"2026-13-01"`` for a day, bucket ``"7"`` of
        four).
        """
        example = '{"field": value} or {"field": [values]} (or a list of such mappings)'
        if isinstance(partitions, Mapping):
            filters: list[Any] = [partitions]
        elif isinstance(partitions, list | tuple):
            filters = list(partitions)
        else:
            raise InvalidArgumentError(
                f"partitions must be {example}, got {type(partitions).__name__}"
            )
        if not all(isinstance(f, Mapping) for f in filters):
            raise InvalidArgumentError(f"partitions must be {example}, got {partitions!r}")
        if any(not f for f in filters):
            raise InvalidArgumentError(
                f"partitions {partitions!r} holds a selection that names no partition field; "
                f"name one of {self.names} (an empty list selects no partition; to read every "
                "partition, pass no partitions)"
            )
        out = []
        for flt in filters:
            norm: dict[str, set[str | None]] = {}
            given: dict[str, Any] = {}
            for name, wanted in flt.items():
                field = self.field_named(name)
                if field.name in given:
                    raise InvalidArgumentError(
                        f"partition field {field.name!r} is named twice in one selection "
                        f"({given[field.name]!r} and {name!r}); name it once, with a list of "
                        "its values to select several"
                    )
                given[field.name] = name
                values = wanted if isinstance(wanted, list | tuple | set | frozenset) else [wanted]
                if any(isinstance(v, Mapping | list | tuple | set | bytes) for v in values):
                    raise InvalidArgumentError(
                        f"partition field {name!r}: values must be scalars (text, numbers, "
                        f"dates), got {wanted!r}"
                    )
                norm[field.name] = {_format_filter_value(field, v) for v in values}
            out.append(norm)
        return out

    def field_named(self, name: Any) -> PartitionField:
        """The field a selection names: matched without case, as column names are
        (:func:`ledger.schema.folded_name`); a name two fields share but for case picks the one
        written exactly so, and is refused otherwise."""
        exact = [f for f in self.fields if f.name == name]
        if exact:
            return exact[0]
        alike = [
            f
            for f in self.fields
            if isinstance(name, str) and folded_name(f.name) == folded_name(name)
        ]
        if len(alike) > 1:
            raise InvalidArgumentError(
                f"{name!r} names partition fields {[f.name for f in alike]} alike (they differ "
                "only in case); give one of them as it is written"
            )
        if not alike:
            raise InvalidArgumentError(
                f"{name!r} is not a partition field; the table's fields are {self.names}"
            )
        return alike[0]


def _format_filter_value(field: PartitionField, value: Any) -> str | None:
    if value is None:
        return value
    if field.transform == "bucket":
        return _bucket_text(field, value)
    if field.transform == "identity":
        return _identity_text(field, value)
    if isinstance(value, str):
        _check_time_text(field, value)
        return value
    if isinstance(value, dt.date | np.datetime64):  # a datetime (or pandas Timestamp) is a date
        if isinstance(value, np.datetime64) and not np.isnat(value):
            value = value.astype("datetime64[us]")  # a unit Arrow takes (not minutes, days)
        try:
            return field.value_of(value)
        except CONVERSION_ERRORS:
            pass  # NaT, or out of the column's range: refused below
    whole = isinstance(value, int | np.integer) and not isinstance(value, bool | np.bool_)
    if field.transform == "year" and whole and 1 <= value <= 9999:
        return f"{int(value):04d}"  # the year's text, as a year field's partitions have it
    raise InvalidArgumentError(_time_form_message(field, value))


def _identity_text(field: PartitionField, value: Any) -> str:
    """The partition text of a value of an identity field, refused unless some value of the
    column's type has exactly it: text must be that value's canonical text (``"3"``, not
    ``"03"``; ``"2026-01-05"``, not ``"2026-1-05"``), other values must convert to the type
    without loss (``3`` or ``3.0`` for an INTEGER, a ``date`` for a DATE)."""
    column_type = field.source_type
    if column_type is None:  # a field made without a schema: the value's own text
        return canonical_text(pa.array([value])).to_pylist()[0]  # type: ignore[no-any-return]
    text: str | None = None
    try:
        if isinstance(value, str):
            converted = pc.cast(pa.array([value], pa.string()), column_type)
        elif _never_of_type(value, column_type):
            converted = None
        else:
            converted = pa.array([value], column_type)
            # Arrow truncates a float into an integer type (3.5 -> 3): only an equal value is exact.
            if isinstance(value, float | decimal.Decimal | np.number) and (
                converted.to_pylist()[0] != value
            ):
                converted = None
        if converted is not None:
            text = canonical_text(converted).to_pylist()[0]
    except CONVERSION_ERRORS:
        text = None
    if text is not None and isinstance(value, str) and value != text:
        # A timestamp's text may leave out a fraction of zeros.
        whole = pa.types.is_timestamp(column_type) and text == f"{value}.000000"
        text = text if whole else None
    if text is None:
        raise InvalidArgumentError(
            f"partition field {field.name!r} is {field.source_sql}: no partition can have "
            f"{value!r}; give {_identity_hint(column_type)} (None selects the NULL partition)"
        )
    return text


def _never_of_type(value: Any, column_type: pa.DataType) -> bool:
    """Values Arrow converts with a loss it does not report: a bool into a number (1), a
    datetime with a time of day (or a zone) into a DATE (its day)."""
    if isinstance(value, bool | np.bool_):
        return not pa.types.is_boolean(column_type)
    if isinstance(value, dt.datetime) and pa.types.is_date(column_type):
        return value.tzinfo is not None or value != dt.datetime.combine(value.date(), dt.time())
    return False


def _identity_hint(column_type: pa.DataType) -> str:
    """How to write a value of an identity field of this type, for error messages."""
    if pa.types.is_integer(column_type):
        return "an integer in the type's range, or its text without leading zeros or '+' (3 or '3')"
    if pa.types.is_date(column_type):
        return "a date, or its text as YYYY-MM-DD ('2026-01-05')"
    if pa.types.is_timestamp(column_type):
        return "a datetime, or its text as YYYY-MM-DDTHH:MM:SS[.ffffff]"
    if pa.types.is_boolean(column_type):
        return "True or False, or 'true' or 'false'"
    if pa.types.is_decimal(column_type):
        return (
            f"a Decimal or an integer with at most {column_type.scale} decimal places, or its "
            f"text with exactly {column_type.scale} ('{pa.array([0], column_type)[0]}')"
        )
    if pa.types.is_string(column_type) or pa.types.is_large_string(column_type):
        return "text"
    return "a value of the column's type, or its text as the table writes it"


# The text of each time transform's values, as ``pc.strftime`` writes them (4-digit years).
_TIME_TEXT = {
    "year": re.compile(r"[0-9]{4}"),
    "month": re.compile(r"[0-9]{4}-[0-9]{2}"),
    "day": re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}"),
    "hour": re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}-[0-9]{2}"),
}
_TIME_SHAPES = {"year": "YYYY", "month": "YYYY-MM", "day": "YYYY-MM-DD", "hour": "YYYY-MM-DD-HH"}


def _check_time_text(field: PartitionField, text: str) -> None:
    """Refuse text no value of a time partition field is: a selection that can match nothing
    is a mistake (``"2026-13-01"``, ``"2026-11-2"``), not an empty answer."""
    shaped = _TIME_TEXT[field.transform].fullmatch(text) is not None
    try:
        valid = shaped and dt.datetime.strptime(text, _TIME_FORMATS[field.transform]).year > 0
    except ValueError:
        valid = False
    if not valid:
        raise InvalidArgumentError(_time_form_message(field, text))


def _time_form_message(field: PartitionField, value: Any) -> str:
    whole = ", or a whole number from 1 to 9999" if field.transform == "year" else ""
    return (
        f"partition field {field.name!r} ({field.spec}) takes a {field.transform} as "
        f"{_TIME_SHAPES[field.transform]} text (or a date or datetime{whole}), got {value!r}"
    )


def _bucket_text(field: PartitionField, value: Any) -> str:
    """A bucket number as its partition's text; refused unless it is one of the field's."""
    text = value if isinstance(value, str) else str(value)
    number_like = isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool))
    if not (
        number_like
        and re.fullmatch(r"0|[1-9][0-9]*", text, flags=re.ASCII)
        and int(text) < (field.buckets or 0)
    ):
        raise InvalidArgumentError(
            f"partition field {field.name!r} ({field.spec}) takes a bucket number from 0 to "
            f"{(field.buckets or 1) - 1}, got {value!r}"
        )
    return text


def _parse_field(spec: str, schema: TableSchema) -> PartitionField:
    if not isinstance(spec, str):
        raise InvalidArgumentError(f"partition spec {spec!r} must be a string")
    match = _TRANSFORM.match(spec)
    if match is None:
        field = PartitionField(spec.strip(), "identity", spec.strip())
    else:
        transform, args = match.group(1).lower(), [a.strip() for a in match.group(2).split(",")]
        if transform == "identity" and len(args) == 1:
            field = PartitionField(args[0], "identity", args[0])
        elif transform in _TIME_FORMATS and len(args) == 1:
            field = PartitionField(f"{args[0]}_{transform}", transform, args[0])
        elif transform == "bucket" and len(args) == 2:
            count, source = args
            if not (count.isascii() and count.isdigit()) or not 1 <= int(count) <= INT64_MAX:
                raise InvalidArgumentError(
                    f"bucket count in {spec!r} must be a positive integer, at most {INT64_MAX}"
                )
            field = PartitionField(f"{source}_bucket", "bucket", source, int(count))
        else:
            raise InvalidArgumentError(
                f"cannot parse partition spec {spec!r}; use a column name, identity(col), "
                "year(col), month(col), day(col), hour(col) or bucket(N, col)"
            )
    if field.source not in schema.names:
        raise InvalidArgumentError(
            f"partition spec {spec!r} names column {field.source!r}, which is not in the schema"
        )
    source_type = schema.type_of(field.source)
    field = replace(
        field, source_type=source_type, source_sql=str(dict(schema.columns)[field.source])
    )
    if field.transform in _TIME_FORMATS and not (
        pa.types.is_timestamp(source_type) or pa.types.is_date(source_type)
    ):
        raise InvalidArgumentError(
            f"{field.transform}() needs a DATE or TIMESTAMP column; {field.source!r} is "
            f"{dict(schema.columns)[field.source]}"
        )
    if field.transform == "hour" and pa.types.is_date(source_type):
        raise InvalidArgumentError(f"hour() needs a TIMESTAMP column; {field.source!r} is DATE")
    if pa.types.is_binary(source_type):
        raise InvalidArgumentError(
            f"cannot partition by BLOB column {field.source!r}; partition by a text or numeric "
            "column (or bucket a text form of it)"
        )
    if pa.types.is_floating(source_type):
        raise InvalidArgumentError(
            f"cannot partition by floating-point column {field.source!r}: equal values may print "
            "differently; bucket or round it into another column first"
        )
    return field


def escape(value: str | None) -> str:
    """Percent-escape a partition value so it is one safe path segment.

    >>> escape("../etc/passwd")
    '%2E%2E%2Fetc%2Fpasswd'
    """
    if value is None:
        return NULL_PARTITION
    out = []
    for char in value:
        if char in _SAFE:
            out.append(char)
        else:
            out.extend(f"%{b:02X}" for b in char.encode("utf-8"))
    return "".join(out) if out else "%"  # the empty string gets a segment of its own


def hashed_segment(value: str | None) -> str:
    """The path segment of a value too long to escape into a path: a hash of its UTF-8 bytes."""
    text = NULL_PARTITION if value is None else value
    digest = hashlib.sha256(text.encode("utf-8")).hexdigest()
    return f"{HASHED_PREFIX}{'n' if value is None else 'v'}{digest}"


def _size(text: str) -> int:
    return len(text.encode("utf-8"))


def unescape(segment: str) -> str | None:
    """Inverse of :func:`escape`."""
    if segment == NULL_PARTITION:
        return None
    if segment == "%":
        return ""
    raw = bytearray()
    i = 0
    while i < len(segment):
        if segment[i] == "%":
            raw.append(int(segment[i + 1 : i + 3], 16))
            i += 3
        else:
            raw.extend(segment[i].encode("ascii"))
            i += 1
    return raw.decode("utf-8")
