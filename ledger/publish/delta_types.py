"""The columns a view publishes and their Delta Lake types: a type Delta cannot hold losslessly
is refused before anything is written."""

from __future__ import annotations

import pyarrow as pa

from ledger.errors import SchemaError
from ledger.schema import ROW_ID
from ledger.sql.spec import TableSpec

# Arrow type -> Delta Lake primitive type; timestamps and decimals are handled apart.
_DELTA_TYPES: dict[pa.DataType, str] = {
    pa.bool_(): "boolean",
    pa.int8(): "byte",
    pa.int16(): "short",
    pa.int32(): "integer",
    pa.int64(): "long",
    pa.float32(): "float",
    pa.float64(): "double",
    pa.string(): "string",
    pa.large_string(): "string",
    pa.binary(): "binary",
    pa.large_binary(): "binary",
    pa.date32(): "date",
}


def published_schema(spec: TableSpec) -> pa.Schema:
    """The columns a table's view publishes: its user columns, and ``_row_id`` when it has
    no primary key (the key the merge matches on). Raises :class:`SchemaError` for a column
    Delta Lake cannot hold."""
    fields = [pa.field(c, t) for c, t in zip(spec.columns, spec.types, strict=True)]
    if spec.generated_row_id:
        fields.append(pa.field(ROW_ID, pa.int64()))
    schema = pa.schema(fields)
    delta_schema(schema)
    return schema


def delta_schema(schema: pa.Schema) -> list[tuple[str, str]]:
    """``(column, Delta Lake type)`` for each field, e.g. ``("amount", "decimal(18,2)")``.

    Raises :class:`SchemaError` for types Delta Lake has no lossless equivalent for (unsigned
    integers, times of day, nested types, ...): deltalake itself would silently map an
    ``uint32`` to a signed ``integer``.

    >>> delta_schema(pa.schema([("at", pa.timestamp("us"))]))
    [('at', 'timestamp_ntz')]
    """
    return [(f.name, _delta_type(f.name, f.type)) for f in schema]


def _delta_type(name: str, data_type: pa.DataType) -> str:
    if data_type in _DELTA_TYPES:
        return _DELTA_TYPES[data_type]
    if pa.types.is_decimal(data_type) and data_type.bit_width == 128:
        return f"decimal({data_type.precision},{data_type.scale})"
    if pa.types.is_timestamp(data_type) and data_type.unit == "us":
        if data_type.tz is None:
            return "timestamp_ntz"
        if data_type.tz in ("UTC", "+00:00"):
            return "timestamp"
    raise SchemaError(
        f"column {name!r} is {data_type}, which Delta Lake cannot hold; Delta's types are "
        "boolean, byte, short, integer, long, float, double, string, binary, date, timestamp "
        "(UTC), timestamp_ntz (microseconds) and decimal(p <= 38, s): publish a view whose "
        "columns have those types"
    )
