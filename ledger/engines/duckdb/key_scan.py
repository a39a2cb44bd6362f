"""The entries of given keys in data files, reading the key columns first.

A correction names few keys of a large table. Decoding every column of every entry to find
them costs a full scan; this read instead

1. skips the row groups whose footer statistics cannot hold a wanted key (the files were
   already chosen by their markers' key ranges, :mod:`ledger.pruning`),
2. reads only the key columns of the others and finds the rows holding a wanted key,
3. reads whole only the row groups holding such a row, and keeps only those rows.

The result is exactly ``entries SEMI JOIN keys USING (key columns)``, in the table's types
(a file written before a schema change reads its missing columns as NULL, narrower ones cast
up): a NULL key matches nothing. Keys of a floating-point column are not read this way (Arrow
and SQL may disagree on NaN and -0.0): :func:`key_entries` answers None and the caller scans.

When the keys are dense (at least one per :data:`DENSE_ROWS_PER_KEY` rows of the files to read,
as when 1% of a large table's keys are corrected at random), every row group holds a wanted key
and steps 1-3 cannot skip anything: the files are then read by DuckDB with the keys as a semi
join instead. Its Parquet reader decodes the key column first and materializes the other
columns of the matching rows only (a text column's values are never copied for the rows left
out), which costs about a third less than decoding every column with pyarrow (docs/concepts.md,
"How a correction reads").
"""

from __future__ import annotations

import functools
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ledger.engines.duckdb.errors import storage_errors
from ledger.engines.duckdb.scan import (
    ParquetSource,
    file_sources,
    misread_by_duckdb,
    with_parquet_sources,
)
from ledger.engines.duckdb.session import ReadSessions, lazy_sql
from ledger.errors import StorageError
from ledger.log.entries import FileMarker
from ledger.sql.dialects import DIALECTS
from ledger.sql.live import rows_of_keys
from ledger.sql.trees import render
from ledger.storage import Store

_READERS = 4  # files read at once
# Keys this dense (one per so many rows of the files read, and files this large) are read by a
# DuckDB semi join: see the module docstring. Below, the key-first read skips row groups.
DENSE_ROWS_PER_KEY = 1024
DENSE_MIN_ROWS = 64 * 1024
# The database those semi joins run on, one per process: it holds no state of any table (files
# are read by path), and opening a database costs tens of milliseconds, more than a child
# connection's microseconds, for every warehouse a process opens.
_DENSE_READS = ReadSessions()


def comparable_keys(types: Sequence[pa.DataType]) -> bool:
    """Whether Arrow matches keys of these types exactly as SQL's equality does."""
    return all(any(check(t) for check in _COMPARABLE) for t in types)


def distinct_integer_keys(keys: pa.Table) -> bool | None:
    """Whether the rows of ``keys``, one integer column without NULL, are all distinct, by
    sorting their values; None for other keys (group them instead).

    Arrow's grouping of 10k keys took about 0.7 ms, mostly starting its engine; the sort 0.1.

    >>> distinct_integer_keys(pa.table({"k": [3, 1, 2]}))
    True
    """
    if keys.num_columns != 1:
        return None
    column = keys.column(0)
    if not pa.types.is_integer(column.type) or column.null_count:
        return None
    values = np.sort(column.to_numpy())
    return not bool(np.any(values[1:] == values[:-1]))


# Key types Arrow compares as SQL does (not floating point: NaN and -0.0 differ between them).
_COMPARABLE = (
    pa.types.is_integer,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_binary,
    pa.types.is_large_binary,
    pa.types.is_date,
    pa.types.is_timestamp,
    pa.types.is_decimal,
    pa.types.is_boolean,
)


def key_entries(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    key_columns: Sequence[str],
    keys: pa.Table,
) -> pa.Table | None:
    """Every entry of ``files`` (rows of ``schema``) whose key is one of ``keys``; None when
    the key types are not :func:`comparable_keys` (scan and join instead).

    >>> key_entries(store, "t/", markers, schema, ["k"], pa.table({"k": [7]}))  # doctest: +SKIP
    """
    wanted = _Wanted.of(keys, schema, key_columns)
    if wanted is None:
        return None
    if _dense(files, wanted):
        joined = _joined_by_duckdb(store, table_prefix, files, wanted)
        if joined is not None:
            return joined
    if len(files) > 1:
        # Files are read side by side: Parquet decoding releases the GIL, and one file's
        # widest column would otherwise keep a core idle.
        with ThreadPoolExecutor(min(len(files), _READERS)) as pool:
            found = list(pool.map(lambda m: _entries_of(store, table_prefix, m, wanted), files))
    else:
        found = [_entries_of(store, table_prefix, m, wanted) for m in files]
    parts = [part for part in found if part is not None]
    if not parts:
        return schema.empty_table()
    return pa.concat_tables(parts)


def _dense(files: Sequence[FileMarker], wanted: _Wanted) -> bool:
    """Whether the wanted keys are so many for the rows of ``files`` that statistics would
    rule out no row group (see the module docstring)."""
    rows = sum(marker.rows for marker in files)
    return rows >= DENSE_MIN_ROWS and wanted.keys.num_rows * DENSE_ROWS_PER_KEY >= rows


def _joined_by_duckdb(
    store: Store, table_prefix: str, files: Sequence[FileMarker], wanted: _Wanted
) -> pa.Table | None:
    """The entries of ``files`` whose key is wanted, by DuckDB's reader and a semi join; None
    when a file is not on a local disk or is one DuckDB misreads (the key-first read then
    reads them through pyarrow).

    One statement names the files itself (:func:`file_sources`): built from relations (a read,
    a projection, views), the same read bound its statement three more times, each bind reading
    the footers again; at 1% of 1M keys that was a sixth of the read's CPU."""
    local = [store.local_path(table_prefix + marker.path) for marker in files]
    paths = [path for path in local if path is not None]
    if len(paths) < len(local) or misread_by_duckdb(paths):
        return None
    cursor = _DENSE_READS.cursor()
    try:
        with storage_errors(f"reading {table_prefix.rstrip('/')!r}"):
            sources = file_sources(cursor, store, table_prefix, {"entries": files}, wanted.schema)
            [source] = sources.parquet
            cursor.register(_WANTED_KEYS, wanted.keys)
            text = _semi_join_text(source, wanted.columns)
            joined = lazy_sql(cursor, text, sources.params).to_arrow_table()
    finally:
        cursor.close()
    # DuckDB hands some types back in another Arrow form (text as a view, say).
    return joined.cast(wanted.schema)


_WANTED_KEYS = "__ledger_wanted_keys"  # on the read's own child connection, closed after it


@functools.lru_cache(maxsize=64)
def _semi_join_text(source: ParquetSource, key_columns: tuple[str, ...]) -> str:
    """The statement of :func:`_joined_by_duckdb`, rendered once per file shape and key."""
    query = rows_of_keys(source.name, _WANTED_KEYS, key_columns)
    return render(with_parquet_sources(query, [source]), DIALECTS["duckdb"])


def holds_keys(
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
    key_columns: Sequence[str],
    keys: pa.Table,
) -> bool | None:
    """Whether ``files`` hold an entry of one of ``keys`` (reading key columns only); None when
    the key types are not :func:`comparable_keys`."""
    wanted = _Wanted.of(keys, schema, key_columns)
    if wanted is None:
        return None
    for marker in files:
        with _opened(store, table_prefix, marker) as parquet:
            if _matching_rows(parquet, wanted):
                return True
    return False


@dataclass(frozen=True)
class _Wanted:
    """The keys looked for, in the table's key types, and how row groups are ruled out."""

    columns: tuple[str, ...]
    keys: pa.Table  # the keys without a NULL (one would match nothing)
    types: tuple[pa.DataType, ...]
    schema: pa.Schema

    @functools.cached_property
    def sorted_values(self) -> tuple[np.ndarray | None, ...]:
        """Per key column, its distinct values sorted, when comparable (what rules out row
        groups); computed when first asked: a dense read never asks."""
        return tuple(_sorted_values(self.keys.column(c)) for c in self.columns)

    @staticmethod
    def of(keys: pa.Table, schema: pa.Schema, key_columns: Sequence[str]) -> _Wanted | None:
        types = tuple(schema.field(c).type for c in key_columns)
        if not comparable_keys(types):
            return None
        table = pa.table(
            [keys.column(c).cast(t) for c, t in zip(key_columns, types, strict=True)],
            names=list(key_columns),
        )
        table = table.filter(_no_null(table))
        return _Wanted(
            columns=tuple(key_columns),
            keys=table,
            types=types,
            schema=schema,
        )


def _no_null(table: pa.Table) -> pa.Array:
    valid = pa.array(np.ones(table.num_rows, dtype=bool))
    for column in table.columns:
        valid = pc.and_(valid, pc.is_valid(column))
    return valid


# --- ruling out row groups by their statistics -------------------------------------------------


def _sorted_values(column: pa.ChunkedArray) -> np.ndarray | None:
    """The column's distinct values, sorted, in the form footer statistics are compared in;
    None for types whose statistics are not compared (every row group is read)."""
    as_numbers = _as_numbers(column.type)
    if as_numbers is not None:
        return np.unique(column.cast(as_numbers).to_numpy())
    if pa.types.is_string(column.type) or pa.types.is_large_string(column.type):
        # Python orders text by code point, as Parquet orders UTF-8 bytes.
        return np.unique(np.array(column.to_pylist(), dtype=object))
    return None


def _as_numbers(data_type: pa.DataType) -> pa.DataType | None:
    if pa.types.is_integer(data_type):
        return pa.int64()
    if pa.types.is_date32(data_type):
        return pa.int32()
    if pa.types.is_timestamp(data_type):
        return pa.int64()
    return None


def _may_hold(parquet: pq.ParquetFile, group: int, wanted: _Wanted, leaves: Sequence[int]) -> bool:
    """Whether row group ``group`` may hold a wanted key: False only when, for some key
    column, no wanted value lies between the group's min and max."""
    row_group = parquet.metadata.row_group(group)
    for column, values, leaf, table_type in zip(
        wanted.columns, wanted.sorted_values, leaves, wanted.types, strict=True
    ):
        if values is None:
            continue
        file_type = parquet.schema_arrow.field(column).type
        bounds = _bounds(row_group.column(leaf).statistics, file_type, table_type)
        if bounds is None:
            continue
        low, high = bounds
        if np.searchsorted(values, high, "right") <= np.searchsorted(values, low, "left"):
            return False
    return True


def _bounds(
    statistics: Any, file_type: pa.DataType, table_type: pa.DataType
) -> tuple[Any, Any] | None:
    """A row group's (min, max) of a key column in the form of :func:`_sorted_values`, or None
    when they are missing or not comparable (e.g. a timestamp of another unit)."""
    if statistics is None or not statistics.has_min_max:
        return None
    if pa.types.is_integer(table_type) and pa.types.is_integer(file_type):
        low, high = statistics.min, statistics.max  # an older, narrower type compares too
    elif file_type != table_type:
        return None
    elif pa.types.is_date32(table_type) or pa.types.is_timestamp(table_type):
        low, high = statistics.min_raw, statistics.max_raw  # days or the unit's ticks
    else:
        low, high = statistics.min, statistics.max
    kinds = (
        (str,) if pa.types.is_string(table_type) or pa.types.is_large_string(table_type) else (int,)
    )
    if isinstance(low, kinds) and isinstance(high, kinds):
        return low, high
    return None


# --- reading ------------------------------------------------------------------------------------


@contextmanager
def _opened(store: Store, table_prefix: str, marker: FileMarker) -> Iterator[pq.ParquetFile]:
    """The file's footer, with storage failures reported as :class:`StorageError`."""
    key = table_prefix + marker.path
    try:
        local = store.local_path(key)
        if local is not None:
            source: Any = local
        else:
            source = store.filesystem.open_input_file(store.fs_path(key))
        with pq.ParquetFile(source, pre_buffer=local is None) as parquet:
            yield parquet
    except (OSError, pa.ArrowInvalid) as e:
        if isinstance(e, StorageError):
            raise
        raise StorageError(
            f"reading {table_prefix.rstrip('/')!r}: a data file could not be read: {e}"
        ) from e


@dataclass(frozen=True)
class _Matches:
    """Rows of one file holding a wanted key: the row groups whose key columns were read, those
    key columns, and the matching rows' positions in them."""

    groups: list[int]
    keys: pa.Table
    positions: np.ndarray  # sorted, into ``keys``

    def __bool__(self) -> bool:
        return bool(len(self.positions))


def _matching_rows(parquet: pq.ParquetFile, wanted: _Wanted) -> _Matches | None:
    names = parquet.schema_arrow.names
    if any(c not in names for c in wanted.columns):
        return None  # a key column the file lacks reads as NULL, which matches nothing
    paths = [parquet.metadata.schema.column(i).path for i in range(parquet.metadata.num_columns)]
    if any(c not in paths for c in wanted.columns):
        return None  # not a flat column: never a key the ledger wrote
    leaves = [paths.index(c) for c in wanted.columns]
    groups = [
        g for g in range(parquet.metadata.num_row_groups) if _may_hold(parquet, g, wanted, leaves)
    ]
    if not groups:
        return None
    read = parquet.read_row_groups(groups, columns=list(wanted.columns))
    keys = pa.table(
        [read.column(c).cast(t) for c, t in zip(wanted.columns, wanted.types, strict=True)],
        names=list(wanted.columns),
    )
    positions = _positions_of(keys, wanted)
    return _Matches(groups, keys, positions) if len(positions) else None


def _positions_of(keys: pa.Table, wanted: _Wanted) -> np.ndarray:
    """Positions (sorted) of the rows of ``keys`` equal to a wanted key."""
    if keys.num_columns == 1:
        in_order = _in_key_order(keys.column(0), wanted.sorted_values[0])
        if in_order is not None:
            return in_order
        value_set = wanted.keys.column(0).combine_chunks()
        found = pc.is_in(keys.column(0), value_set=value_set, skip_nulls=True)
        return np.asarray(pc.indices_nonzero(found).to_numpy(zero_copy_only=False), np.int64)
    # Positional names: Arrow reads a name starting with "." as a nested field path.
    positional = [f"key{i}" for i in range(keys.num_columns)]
    numbered = keys.rename_columns(positional).append_column(
        "position", pa.array(np.arange(keys.num_rows, dtype=np.int64))
    )
    joined = numbered.join(
        wanted.keys.rename_columns(positional), keys=positional, join_type="left semi"
    )
    return np.sort(joined.column("position").to_numpy())


def _in_key_order(column: pa.ChunkedArray, wanted: np.ndarray | None) -> np.ndarray | None:
    """Positions of ``wanted`` values in ``column`` by binary search, when the column is a
    number without NULL that strictly increases (a file sorted by its key, each key once: what
    the writer makes); None otherwise."""
    as_numbers = _as_numbers(column.type)
    if wanted is None or as_numbers is None or column.null_count:
        return None
    values = column.cast(as_numbers).to_numpy()
    if len(values) > 1 and not bool(np.all(values[1:] > values[:-1])):
        return None
    found = np.searchsorted(values, wanted)
    inside = found < len(values)
    found, candidates = found[inside], wanted[inside]
    return np.asarray(found[values[found] == candidates], np.int64)


def _entries_of(
    store: Store, table_prefix: str, marker: FileMarker, wanted: _Wanted
) -> pa.Table | None:
    with _opened(store, table_prefix, marker) as parquet:
        matches = _matching_rows(parquet, wanted)
        return None if matches is None else _whole_rows(parquet, matches, wanted)


def _whole_rows(parquet: pq.ParquetFile, matches: _Matches, wanted: _Wanted) -> pa.Table:
    """The matching rows with every column of the schema (key columns already read)."""
    sizes = np.array([parquet.metadata.row_group(g).num_rows for g in matches.groups], np.int64)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    group_of = np.searchsorted(starts, matches.positions, "right") - 1
    hit = np.unique(group_of)
    # Positions in the concatenation of the row groups holding a match.
    hit_sizes = sizes[hit]
    hit_starts = np.concatenate([[0], np.cumsum(hit_sizes)])
    rank = np.searchsorted(hit, group_of)
    in_hit = matches.positions - starts[group_of] + hit_starts[rank]

    present = set(parquet.schema_arrow.names)
    others = [f.name for f in wanted.schema if f.name not in wanted.columns and f.name in present]
    values = (
        parquet.read_row_groups([matches.groups[i] for i in hit], columns=others).take(
            pa.array(in_hit)
        )
        if others
        else None
    )
    key_rows = matches.keys.take(pa.array(matches.positions))
    count = len(matches.positions)
    columns = []
    for field in wanted.schema:
        if field.name in wanted.columns:
            columns.append(key_rows.column(field.name))
        elif values is not None and field.name in present:
            columns.append(values.column(field.name).cast(field.type))
        else:
            columns.append(pa.chunked_array([pa.nulls(count, field.type)]))
    return pa.table(columns, schema=wanted.schema)
