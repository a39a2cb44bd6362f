"""Skipping files with the statistics in their markers, before any Parquet footer is opened."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from ledger.log.entries import FileMarker, json_value


def prune_by_keys(
    markers: Sequence[FileMarker], keys: pa.Table, key_columns: Sequence[str]
) -> list[FileMarker]:
    """Keep the files whose per-column key range can hold one of ``keys``.

    Only integer, text, date and timestamp bounds are compared (their JSON forms order like the
    values); other types keep every file.
    """
    if keys.num_rows == 0:
        return []
    ranges: list[tuple[int, Callable[[Any], Any], Any, Any]] = []
    for index, column in enumerate(key_columns):
        values = keys.column(column)
        decode = _decoder(values.type)
        if decode is None:
            continue
        bounds = pc.min_max(values)
        low, high = (decode(json_value(bounds[b].as_py())) for b in ("min", "max"))
        ranges.append((index, decode, low, high))
    if not ranges:
        return list(markers)
    return [m for m in markers if _overlaps(m, ranges)]


def _decoder(data_type: pa.DataType) -> Callable[[Any], Any] | None:
    """How to turn a JSON key bound back into a value that orders like the column, or None if
    the column's bounds are not compared (every file is kept)."""
    if pa.types.is_integer(data_type):
        return int
    if pa.types.is_string(data_type) or pa.types.is_large_string(data_type):
        return str
    if pa.types.is_date(data_type):
        return dt.date.fromisoformat
    if pa.types.is_timestamp(data_type):
        # Aware datetimes compare as instants whatever their offset; naive ones as written.
        return dt.datetime.fromisoformat
    return None


def _overlaps(marker: FileMarker, ranges: list[tuple[int, Callable[[Any], Any], Any, Any]]) -> bool:
    if marker.key_min is None or marker.key_max is None:
        return True
    for index, decode, low, high in ranges:
        try:
            file_low, file_high = decode(marker.key_min[index]), decode(marker.key_max[index])
            if file_high < low or file_low > high:
                return False
        except (TypeError, ValueError):  # a bound of another type (schema widened): keep it
            continue
    return True


def prune_by_partitions(
    markers: Sequence[FileMarker], filters: Sequence[Mapping[str, set[str | None]]]
) -> list[FileMarker]:
    """Keep the files whose partition matches any of the filters (each an AND of fields)."""
    return [
        m
        for m in markers
        if any(
            all(m.partition.get(name) in wanted for name, wanted in flt.items()) for flt in filters
        )
    ]
