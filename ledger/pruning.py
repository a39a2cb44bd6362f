"""Skipping files with the statistics in their markers, before any Parquet footer is opened."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
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
    ranges: list[tuple[int, Any, Any]] = []
    for index, column in enumerate(key_columns):
        values = keys.column(column)
        if not _orderable(values.type):
            continue
        bounds = pc.min_max(values)
        ranges.append((index, json_value(bounds["min"].as_py()), json_value(bounds["max"].as_py())))
    if not ranges:
        return list(markers)
    return [m for m in markers if _overlaps(m, ranges)]


def _orderable(data_type: pa.DataType) -> bool:
    return bool(
        pa.types.is_integer(data_type)
        or pa.types.is_string(data_type)
        or pa.types.is_large_string(data_type)
        or pa.types.is_date(data_type)
        or pa.types.is_timestamp(data_type)
    )


def _overlaps(marker: FileMarker, ranges: list[tuple[int, Any, Any]]) -> bool:
    if marker.key_min is None or marker.key_max is None:
        return True
    for index, low, high in ranges:
        file_low, file_high = marker.key_min[index], marker.key_max[index]
        if file_low is None or file_high is None or type(file_low) is not type(low):
            continue
        if file_high < low or file_low > high:
            return False
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
