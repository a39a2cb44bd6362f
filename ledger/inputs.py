"""Every source a write accepts, turned into Arrow tables of bounded size.

>>> rows = next(read_rows([{"id": 1, "name": "a"}, {"id": 2}], table.schema))  # doctest: +SKIP
>>> rows.given["name"].to_pylist()  # doctest: +SKIP
[True, False]

One function, :func:`read_rows`, serves every write (``insert``, ``upsert``, ``update``,
``delete``, ``append_entries``, in a table or a transaction). It yields :class:`Rows`: an Arrow
table plus, for a list of dicts whose rows name different columns, which rows named each column,
so a partial upsert can tell "absent, keep the current value" from "explicit None". JSON lines
read for an upsert or update (``row_presence=True``) say the same line by line. Every other
source has fixed columns: a column it has is present in every row.

Files (Parquet, CSV, JSON lines; one file, a folder or a glob; local or ``s3://``) are read
file by file by pyarrow's streaming readers in bounded batches, so a file larger than memory
streams. Conversion
to the table's column types is not done here (see :func:`ledger.schema.conform`), except that CSV
and JSON text is parsed straight into the types of the table's columns it names (so ``"007"``
stays a string in a VARCHAR column).
"""

from __future__ import annotations

import decimal
import fnmatch
import functools
import json
import os
import re
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import urlparse

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.fs as pafs
import pyarrow.json as pajson
import pyarrow.parquet as pq

from ledger.engines.duckdb.write import relation_batches
from ledger.errors import (
    InvalidArgumentError,
    LedgerError,
    MalformedSourceError,
    SourceNotFoundError,
    StorageError,
    TypeMismatchError,
)
from ledger.schema import (
    BELOW_MICROSECONDS,
    DECIMAL_NUMBER_TEXT,
    FLOAT_EXACT_INTEGERS,
    FLOAT_RELATIVE_ERROR,
    INTEGER_TEXT,
    NO_OFFSET,
    NONZERO_NUMBER_TEXT,
    OFFSET,
    PLAIN_INTEGER_TEXT,
    RESERVED,
    TableSchema,
    an,
    arrow_to_sql_or_str,
    conform,
    dates_from_text,
    decimal_text_refusal,
    dicts_to_arrow,
    float_overflow_message,
    float_text_message,
    float_underflow_message,
    folded_name,
    inexact_integer,
    inexact_integer_message,
    parse_text,
    timestamp_refusal,
    to_arrow,
    without_zero_nanoseconds,
)
from ledger.storage.base import Store
from ledger.storage.s3_settings import S3Settings, s3_settings

ACCEPTED_SOURCES = (
    "a list of dicts",
    "a dict of lists",
    "a pyarrow Table, RecordBatch or RecordBatchReader",
    "a pandas DataFrame",
    "a polars DataFrame",
    "a DuckDB relation",
    "a path or URI (local or s3://) to Parquet, CSV or JSON-lines files: one file, a folder "
    "or a glob",
)
FILE_FORMATS = {
    ".parquet": "parquet",
    ".pq": "parquet",
    ".csv": "csv",
    # Compressed CSV, decompressed while read (_open_stream).
    ".csv.gz": "csv",
    ".csv.bz2": "csv",
    ".csv.zst": "csv",
    ".json": "json",
    ".jsonl": "json",
    ".ndjson": "json",
}
# Rows per batch read from a file or a DuckDB relation; writers gather batches into bigger
# chunks, so this only bounds the memory of one read.
READ_BATCH_ROWS = 1 << 16
# Bytes per block read from a CSV or JSON file. The readers run ahead of the consumer by a
# fixed number of blocks, so this bounds the memory a text file takes while it streams.
TEXT_BLOCK_BYTES = 1 << 18
_GLOB_CHARACTERS = frozenset("*?[")
_Item = TypeVar("_Item")


@dataclass(frozen=True)
class Rows:
    """A chunk of caller data as Arrow.

    ``given`` holds, for each column that only some rows named (a list of dicts with rows of
    different shapes), a boolean mask that is true where the row named the column. Columns not
    in ``given`` were named by every row.
    """

    table: pa.Table
    given: Mapping[str, pa.Array] = field(default_factory=dict)

    @property
    def num_rows(self) -> int:
        return int(self.table.num_rows)

    def slice(self, start: int, length: int) -> Rows:
        return Rows(
            self.table.slice(start, length),
            {name: mask.slice(start, length) for name, mask in self.given.items()},
        )


@dataclass(frozen=True)
class SourceFiles:
    """Some of the data files a read of ``location`` (a folder or glob) takes: those of
    ``paths`` (absolute, as :func:`local_source_files` gives them) it still finds. How
    ``ledger load`` reads only the files of a folder it has not loaded yet."""

    location: str
    paths: tuple[str, ...]


def concat_rows(parts: Sequence[Rows], schema: TableSchema | None = None) -> Rows:
    """One :class:`Rows` from several (columns absent from a part are NULL there, and count as
    not given in its rows when another part names them). With ``schema``, a column the parts
    give in different types (files of a folder) is converted part by part first, as a part
    alone would be (see :func:`in_common_types`)."""
    if len(parts) == 1:
        return parts[0]
    tables = [p.table for p in parts]
    if schema is not None:
        tables = in_common_types(tables, schema)
    table = pa.concat_tables(tables, promote_options="permissive")
    partial = {
        name
        for part in parts
        for name in table.column_names
        if name in part.given or name not in part.table.column_names
    }
    given: dict[str, pa.Array] = {}
    for name in sorted(partial):
        masks = [
            part.given[name]
            if name in part.given
            else pa.nulls(part.num_rows, pa.bool_()).fill_null(name in part.table.column_names)
            for part in parts
        ]
        given[name] = pa.concat_arrays(masks)
    return Rows(table, given)


def in_common_types(tables: list[pa.Table], schema: TableSchema) -> list[pa.Table]:
    """``tables`` (the files of a folder, say) with each column they give in different types
    in one type: a column of the table converted in each table to its type, by the rules that
    convert one file alone (:func:`ledger.schema.conform`), so a folder stores what its files
    store one by one; a column the table lacks as text, which the table's checks then refuse
    as an unknown column (or a schema evolution adds, or a transform reads). Arrow's own
    promotion would refuse text beside numbers, or round a BIGINT beside a DOUBLE."""
    kinds: dict[str, set[pa.DataType]] = {}
    for table in tables:
        for column in table.schema:
            if not pa.types.is_null(column.type):
                kinds.setdefault(column.name, set()).add(column.type)
    differing = [name for name, types in kinds.items() if len(types) > 1 and name not in RESERVED]
    if not differing:
        return tables
    known = set(schema.names)
    unified = []
    for table in tables:
        for name in differing:
            if name not in table.column_names or pa.types.is_null(table.schema.field(name).type):
                continue
            values = table.column(name)
            if name in known:
                converted = conform(pa.table({name: values}), schema, require_all_keys=False)
                values = converted[0].column(name)
            else:
                values = _as_text(name, values, kinds[name])
            table = table.set_column(table.column_names.index(name), name, values)
        unified.append(table)
    return unified


def _as_text(name: str, values: pa.ChunkedArray, kinds: set[pa.DataType]) -> pa.ChunkedArray:
    try:
        return values.cast(pa.string())
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        shown = sorted(str(kind) for kind in kinds)
        raise MalformedSourceError(
            f"column {name!r} has different kinds of values in the files read ({shown}), "
            "which do not convert to one; give it one kind in every file (or load the files "
            "one by one); nothing was written"
        ) from e


def read_rows(
    data: Any,
    schema: TableSchema,
    *,
    store: Store | None = None,
    chunk_rows: int = 1 << 20,
    in_memory_chunk_rows: int = 1 << 22,
    row_presence: bool = False,
    empty_sources: bool = False,
) -> Iterator[Rows]:
    """Yield ``data`` as :class:`Rows`: streams and files gathered into chunks of about
    ``chunk_rows`` rows, data already in memory cut into slices of ``in_memory_chunk_rows``.
    Empty chunks are skipped, so empty data yields nothing; with ``empty_sources``, a source
    that holds columns and no rows (a CSV of a header alone, which a single row written without
    a header is; an empty DataFrame, Arrow table, stream or relation; a dict of empty lists)
    yields a chunk of no rows with its columns, so that they are checked as those of a source
    with rows are. An empty list of dicts names no column and still yields nothing.

    ``schema`` gives the types CSV and JSON text is parsed into; ``store`` (the table's) gives
    the S3 options for ``s3://`` sources. Anything else raises :class:`TypeMismatchError`
    listing the accepted sources. With ``row_presence`` (an upsert or update), each line of a
    JSON-lines file says which columns it gives, as each dict of a list does (an absent key
    keeps the row's value, an explicit ``null`` sets NULL); inserts need no such masks.
    """
    if isinstance(data, str | os.PathLike | SourceFiles):
        files = data if isinstance(data, SourceFiles) else SourceFiles(os.fspath(data), ())
        if row_presence:
            yield from _file_rows_with_presence(files, schema, store, empty_sources)
        else:
            batches = _file_batches(files, schema, store)
            yield from _gather(batches, chunk_rows, empty_sources, schema)
    elif isinstance(data, pa.RecordBatchReader):
        batches = _or_no_rows(iter(data), lambda: data.schema) if empty_sources else iter(data)
        yield from _gather(batches, chunk_rows, empty_sources)
    elif _is_duckdb_relation(data):
        batches = _relation_batches(data)
        if empty_sources:
            batches = _or_no_rows(batches, lambda: _relation_schema(data))
        yield from _gather(batches, chunk_rows, empty_sources)
    else:
        rows = _in_memory_rows(data, schema)
        if empty_sources and not rows.num_rows and rows.table.num_columns:
            yield rows
        yield from _slices(rows, in_memory_chunk_rows)


# --- in-memory sources ------------------------------------------------------------------------


def is_rows_source(data: Any) -> bool:
    """Whether ``data`` is in a form :func:`read_rows` takes (it may still fail to read)."""
    if isinstance(data, list | Mapping | str | os.PathLike | SourceFiles):
        return True
    if isinstance(data, pa.Table | pa.RecordBatch):
        return True
    if isinstance(data, pa.RecordBatchReader) or _is_duckdb_relation(data):
        return True
    module, name = type(data).__module__, type(data).__name__
    return (module.startswith("pandas") or module.startswith("polars")) and name == "DataFrame"


def _in_memory_rows(data: Any, schema: TableSchema) -> Rows:
    if isinstance(data, list):
        return _rows_from_dicts(data, schema)
    if isinstance(data, pa.Table | pa.RecordBatch | Mapping):
        return Rows(to_arrow(data, schema))
    module = type(data).__module__
    if module.startswith("pandas") and type(data).__name__ == "DataFrame":
        return Rows(to_arrow(data, schema))
    if module.startswith("polars") and type(data).__name__ == "DataFrame":
        return Rows(_from_polars(data))
    raise TypeMismatchError(
        f"cannot write data of type {type(data).__module__}.{type(data).__name__}; pass "
        + "; ".join(ACCEPTED_SOURCES)
    )


def refused_dict_row(
    rows: Any, schema: TableSchema, *, allow_new_columns: bool
) -> TypeMismatchError | None:
    """The refusal of the first dict of ``rows`` (or row of a pandas DataFrame) whose values do
    not convert, naming its index in the list (its position in the frame); None when the rows
    convert on their own (the refusal came from elsewhere) or ``rows`` is another source.

    Called only after a whole conversion refused, so good appends pay nothing: halves of the
    list are converted, keeping the first that refuses, about twice the list's conversion."""
    if isinstance(rows, list):
        if not all(isinstance(row, Mapping) for row in rows):
            return None
        where = "of the list"

        def converted(part: Any) -> pa.Table:
            return dicts_to_arrow(part, schema)[0]

        def sliced(start: int, end: int) -> Any:
            return rows[start:end]
    elif _is_pandas_frame(rows):
        where = "of the DataFrame"

        def converted(part: Any) -> pa.Table:
            return to_arrow(part, schema)

        def sliced(start: int, end: int) -> Any:
            return rows.iloc[start:end]
    else:
        return None

    def refusal(part: Any) -> TypeMismatchError | None:
        try:
            table = converted(part)
            table = table.drop_columns([n for n in table.column_names if n in RESERVED])
            conform(table, schema, allow_new_columns=allow_new_columns, require_all_keys=False)
        except TypeMismatchError as refused:
            return refused
        except LedgerError:
            return None
        return None

    if refusal(rows) is None:
        return None
    start, end = 0, len(rows)
    while end - start > 1:
        middle = (start + end) // 2
        if refusal(sliced(start, middle)) is not None:
            end = middle
        else:
            start = middle
    found = refusal(sliced(start, start + 1))
    if found is None:
        return None
    # The refusal of the one-row slice numbers its row 0; the list's index replaces it.
    reason = _SLICE_ROW.sub("", str(found))
    return TypeMismatchError(f"row {start} {where} (counting from 0): {reason}")


def _is_pandas_frame(data: Any) -> bool:
    return type(data).__module__.startswith("pandas") and type(data).__name__ == "DataFrame"


_SLICE_ROW = re.compile(r", row \d+ \(counted from 0\)")


def _rows_from_dicts(rows: list[Any], schema: TableSchema) -> Rows:
    """A list of dicts: one Arrow table with every column any row names, and which rows named
    it. Rows are grouped by their set of names (few distinct shapes in practice), so the masks
    are built per shape, not per row and column."""
    table, same_names = dicts_to_arrow(rows, schema)  # checks that every row is a dict
    if rows and not table.num_columns and schema.names:
        # Dicts that name no column are rows all the same: one column of the table, named by
        # none of them, carries their count (an all-NULL row; a keyed write refuses it).
        first = schema.names[0]
        table = pa.table({first: pa.nulls(len(rows), schema.type_of(first))})
        return Rows(table, {first: pa.array([False] * len(rows), pa.bool_())})
    if same_names or set(map(len, rows)) <= {table.num_columns}:
        return Rows(table)  # a row with as many names as all rows together names every column
    shape_ids: list[int] = []
    shapes: dict[tuple[str, ...], int] = {}
    for row in rows:
        shape_ids.append(shapes.setdefault(tuple(row), len(shapes)))
    names_of_shape = [frozenset(shape) for shape in shapes]
    if len(set(names_of_shape)) <= 1:
        return Rows(table)
    ids = pa.array(shape_ids, pa.int32())
    given: dict[str, pa.Array] = {}
    for name in table.column_names:
        naming = [i for i, names in enumerate(names_of_shape) if name in names]
        if len(naming) < len(names_of_shape):
            given[name] = pc.is_in(ids, pa.array(naming, pa.int32()))
    return Rows(table, given)


def _from_polars(frame: Any) -> pa.Table:
    try:
        table: pa.Table = frame.to_arrow()
    except Exception as e:  # polars raises its own error types
        raise TypeMismatchError(f"the polars DataFrame does not convert to Arrow: {e}") from e
    # polars hands out large and view string types; the table's columns are plain strings.
    fields = [
        pa.field(f.name, pa.string())
        if pa.types.is_large_string(f.type) or pa.types.is_string_view(f.type)
        else f
        for f in table.schema
    ]
    return table.cast(pa.schema(fields))


def _is_duckdb_relation(data: Any) -> bool:
    return type(data).__module__.startswith("duckdb") and hasattr(data, "to_arrow_reader")


def _relation_batches(relation: Any) -> Iterator[pa.RecordBatch]:
    return relation_batches(relation, READ_BATCH_ROWS)


def _relation_schema(relation: Any) -> pa.Schema:
    """The columns of a relation that streamed no batch (its query run again over no rows)."""
    schema: pa.Schema = relation.limit(0).to_arrow_reader(1).schema
    return schema


def _or_no_rows(
    batches: Iterator[pa.RecordBatch], schema: Callable[[], pa.Schema]
) -> Iterator[pa.RecordBatch]:
    """``batches``, or when there are none (an empty stream), one batch of no rows with the
    stream's columns, so that they are checked as a stream's with rows are."""
    streamed = False
    for batch in batches:
        streamed = True
        yield batch
    if not streamed:
        yield pa.RecordBatch.from_pylist([], schema=schema())


# --- chunking ---------------------------------------------------------------------------------


def _slices(rows: Rows, chunk_rows: int) -> Iterator[Rows]:
    for start in range(0, rows.num_rows, chunk_rows):
        yield rows.slice(start, chunk_rows)


def _gather(
    batches: Iterator[pa.RecordBatch],
    chunk_rows: int,
    keep_empty: bool = False,
    schema: TableSchema | None = None,
) -> Iterator[Rows]:
    """Streamed batches gathered into chunks of about ``chunk_rows`` rows; with
    ``keep_empty``, a batch of columns and no rows is a chunk of its own. With ``schema``,
    batches (of several files) that give a column different types are converted to one (see
    :func:`concat_rows`)."""
    pending: list[pa.RecordBatch] = []
    count = 0
    for batch in batches:
        if not batch.num_rows:
            if keep_empty and batch.num_columns:
                yield Rows(pa.Table.from_batches([batch]))
            continue
        pending.append(batch)
        count += batch.num_rows
        if count >= chunk_rows:
            yield _rows_of_batches(pending, schema)
            pending, count = [], 0
    if pending:
        yield _rows_of_batches(pending, schema)


def _rows_of_batches(batches: list[pa.RecordBatch], schema: TableSchema | None) -> Rows:
    """Batches of several files may differ in columns: the rows of a file that lacks a column
    did not give it (an upsert keeps their values), as for a list of dicts."""
    if all(b.schema == batches[0].schema for b in batches):
        return Rows(pa.Table.from_batches(batches))
    return concat_rows([Rows(pa.Table.from_batches([b])) for b in batches], schema)


# --- files ------------------------------------------------------------------------------------


def _file_batches(
    files: SourceFiles, schema: TableSchema, store: Store | None
) -> Iterator[pa.RecordBatch]:
    location = files.location
    filesystem, paths, file_format = _resolve_source_files(files, store)
    read_file = _FILE_READERS[file_format]
    for path in paths:
        yield from _reading(
            location, path, file_format, read_file(filesystem, path, _types(schema))
        )


def _file_rows_with_presence(
    files: SourceFiles, schema: TableSchema, store: Store | None, empty_files: bool
) -> Iterator[Rows]:
    """Files as :class:`Rows`; JSON lines with each line's own presence masks, other formats
    with the fixed columns of each file."""
    location = files.location
    filesystem, paths, file_format = _resolve_source_files(files, store)
    for path in paths:
        if file_format == "json":
            rows = _json_rows_with_presence(filesystem, path, _types(schema))
            yield from _reading(location, path, file_format, rows)
        else:
            batches = _FILE_READERS[file_format](filesystem, path, _types(schema))
            read = _reading(location, path, file_format, batches)
            yield from _gather(read, READ_BATCH_ROWS, empty_files)


def _types(schema: TableSchema) -> dict[str, pa.DataType]:
    return dict(zip(schema.names, schema.arrow().types, strict=True))


def _reading(location: str, path: str, file_format: str, items: Iterator[_Item]) -> Iterator[_Item]:
    """``items`` read from one file, its reader's failures raised as the ledger's errors."""
    try:
        yield from items
    except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError) as e:
        source = repr(path) if location == path else f"{path!r} (from {location!r})"
        raise MalformedSourceError(
            f"{source} could not be read as {file_format}: {e}. Fix the "
            "file (or pass the data another way); nothing was written"
        ) from e
    except OSError as e:
        codec = _CODECS.get(Path(path).suffix.lower())
        if codec is not None and _DECOMPRESSION_FAILURE.search(str(e)):
            # The bytes arrived: they are no valid stream of their codec (truncated, corrupt,
            # or another format under its name), which is bad input, not a store failure.
            raise MalformedSourceError(
                f"{path!r} (from {location!r}) could not be decompressed as {codec}: {e}. Fix "
                "or replace the file (or pass it uncompressed); nothing was written"
            ) from e
        raise StorageError(f"reading {path!r} (from {location!r}) failed: {e}") from e


# How Arrow's codecs report bytes that are no valid stream of their format.
_DECOMPRESSION_FAILURE = re.compile(
    r"inflate failed|decompress failed|Truncated compressed stream", re.IGNORECASE
)


# Each file is read by its format's own streaming reader, one file at a time: their read-ahead
# is a fixed number of blocks or row groups, so memory stays bounded however large the file is
# (a pyarrow dataset scanner runs further ahead of a slow consumer).


def _parquet_batches(
    filesystem: pafs.FileSystem, path: str, table_types: Mapping[str, pa.DataType]
) -> Iterator[pa.RecordBatch]:
    with filesystem.open_input_file(path) as source:
        file = pq.ParquetFile(source)
        kept = _without_pandas_numbering(file.schema_arrow, table_types)
        if not file.metadata.num_rows:  # its columns, for the caller to check (read_rows)
            schema = file.schema_arrow
            yield pa.RecordBatch.from_pylist([], schema=_selected(schema, kept))
            return
        yield from file.iter_batches(batch_size=READ_BATCH_ROWS, columns=kept)


def _selected(schema: pa.Schema, names: list[str] | None) -> pa.Schema:
    return schema if names is None else pa.schema([schema.field(name) for name in names])


def _without_pandas_numbering(
    schema: pa.Schema, table_types: Mapping[str, pa.DataType]
) -> list[str] | None:
    """The file's columns without the index pandas stored beside the data (``to_parquet`` of a
    filtered frame writes its row numbers as ``__index_level_0__``) when the table has no column
    of that name: read as a DataFrame, such an index is row numbering and is not written either.
    An index named like a table column (``set_index("id")``) is that column. None: every column."""
    metadata = (schema.metadata or {}).get(b"pandas")
    if metadata is None:
        return None
    try:
        index = json.loads(metadata).get("index_columns", [])
    except (ValueError, AttributeError):
        return None  # not pandas' metadata after all: read every column
    known = {folded_name(name) for name in table_types}
    numbering = {name for name in index if isinstance(name, str) and folded_name(name) not in known}
    if not numbering:
        return None
    return [name for name in schema.names if name not in numbering]


def _csv_batches(
    filesystem: pafs.FileSystem, path: str, table_types: Mapping[str, pa.DataType]
) -> Iterator[pa.RecordBatch]:
    """CSV text parsed straight into the types of the table's columns it names (so ``007``
    stays a string in a VARCHAR column)."""
    # Integer columns are read as text and converted here: a whole number written with a
    # fractional part of zeros (``1.0``, as pandas writes an integer column holding NaN) is
    # that number, as it is from every other source.
    integers = {name: kind for name, kind in table_types.items() if pa.types.is_integer(kind)}
    # BLOB values are hex in CSV, as the command line writes them (CSV is text: the bytes of
    # the text itself are not the value).
    blobs = {name: kind for name, kind in table_types.items() if _is_binary(kind)}
    # Timestamps are read as text and parsed here by the same parser, so a value written with
    # nanosecond digits follows the rule of every other source (see _csv_timestamps).
    timestamps = {name: kind for name, kind in table_types.items() if pa.types.is_timestamp(kind)}
    # Dates too, so a timestamp at midnight (as databases export a DATE) is that date.
    dates = {name: kind for name, kind in table_types.items() if pa.types.is_date(kind)}
    # Booleans too: Arrow's CSV parser takes no spaces around them (nor ``tRue``), while text
    # from every other source is trimmed and cast (schema.parse_text).
    booleans = [name for name, kind in table_types.items() if pa.types.is_boolean(kind)]
    # Arrow's parser reads a number too large for its column as infinity and rounds integers
    # beyond those a float holds exactly: refused, see _refuse_changed_floats.
    floats = {name: kind for name, kind in table_types.items() if pa.types.is_floating(kind)}
    # Floats and decimals too: Arrow's parser trims spaces and tabs only, while text from every
    # other source is trimmed as Python's float() and Decimal() trim it (a line break, a CR, a
    # no-break space around the number), see _csv_numbers.
    decimals = [name for name, kind in table_types.items() if pa.types.is_decimal(kind)]
    numbers = {name: table_types[name] for name in [*floats, *decimals]}
    as_text = dict.fromkeys(
        [*integers, *blobs, *timestamps, *dates, *booleans, *numbers], pa.string()
    )
    convert = pacsv.ConvertOptions(
        column_types={**table_types, **as_text},
        # An empty unquoted field is NULL; "" is an empty string; "NA" is text.
        null_values=[""],
        strings_can_be_null=True,
        quoted_strings_can_be_null=False,
    )
    try:
        with _open_stream(filesystem, path) as source:
            batches = pacsv.open_csv(
                source,
                read_options=pacsv.ReadOptions(block_size=TEXT_BLOCK_BYTES),
                # A quoted value may hold a line break (slower to split into blocks, but right).
                parse_options=pacsv.ParseOptions(newlines_in_values=True),
                convert_options=convert,
            )
            rows_before = 0
            nanosecond_columns: set[str] = set()
            zeros_checked: set[str] = set()
            for batch in batches:
                converted = _csv_integers(batch, integers, rows_before, path) if integers else batch
                converted = _csv_numbers(converted, numbers) if numbers else converted
                if floats:
                    _refuse_changed_floats(filesystem, path, converted, floats, zeros_checked)
                if timestamps:
                    converted = _csv_timestamps(
                        converted, timestamps, rows_before, path, nanosecond_columns
                    )
                if dates:
                    converted = _csv_dates(converted, dates, rows_before, path)
                if booleans:
                    converted = _csv_booleans(converted, booleans, rows_before)
                yield _csv_blobs(converted, blobs, rows_before) if blobs else converted
                rows_before += batch.num_rows
            if not rows_before:
                # A header and no row (a single row written without a header is one): its
                # columns, for the caller to check as it checks those of rows (read_rows).
                yield pa.RecordBatch.from_pylist([], schema=batches.schema)
    except pa.ArrowInvalid as e:
        if _EMPTY_CSV in str(e) and _holds_no_bytes(filesystem, path):
            # A compressed file of no bytes once decompressed (a listing skips only files of
            # zero bytes as stored) is empty data, as a zero-byte file is.
            return
        refusal = _csv_refusal(filesystem, path, str(e), table_types)
        if refusal is None:
            raise
        raise pa.ArrowInvalid(refusal) from e


# How Arrow's CSV reader refuses a stream of no bytes.
_EMPTY_CSV = "Empty CSV file"


def _holds_no_bytes(filesystem: pafs.FileSystem, path: str) -> bool:
    with _open_stream(filesystem, path) as source:
        return not source.read(1)


def _csv_refusal(
    filesystem: pafs.FileSystem, path: str, message: str, table_types: Mapping[str, pa.DataType]
) -> str | None:
    """Arrow's CSV error about one column in the file's own terms: the column by its name and
    the row counted from 1 after the header, never Arrow's column number (counted from 0).
    None for an error about no one column (a line with too many fields)."""
    column = _ARROW_CSV_COLUMN.search(message)
    if column is None:
        return None
    if _CSV_EMPTY_VALUE.search(message):
        quoted_empty = _csv_quoted_empty(filesystem, path, int(column.group(1)), table_types)
        if quoted_empty is not None:
            return quoted_empty
    if _CSV_RESCALE_ERROR.search(message) is None:
        unfit_decimal = _csv_unfit_decimal(filesystem, path, int(column.group(1)), table_types)
        if unfit_decimal is not None:
            return unfit_decimal
    where = _csv_error_row(filesystem, path, message, table_types)
    if where is not None and (
        _CSV_NAIVE_TIMESTAMP_ERROR.search(message) or _CSV_RESCALE_ERROR.search(message)
    ):
        # These say what is wrong and what to do; Arrow's own advice (assume_timezone) is for
        # its API, not for this file.
        return where
    detail = _with_table_type_names(message[column.end() :], table_types)
    if where is None:
        where = _csv_column_label(filesystem, path, int(column.group(1)))
    return f"{where}: {detail}"


# Arrow's CSV errors about an empty value ("" quoted, since an empty unquoted field is NULL).
_CSV_EMPTY_VALUE = re.compile(
    r"In CSV column #\d+: (?:Row #\d+: )?(?:CSV conversion error to [^:]+: invalid value ''$"
    r"|Empty string cannot be converted)"
)


def _csv_unfit_decimal(
    filesystem: pafs.FileSystem, path: str, index: int, table_types: Mapping[str, pa.DataType]
) -> str | None:
    """The first text of DECIMAL column ``index`` that is no value of it (no number, too many
    whole digits or decimal places), with its column, SQL type and row; None when the column
    is no DECIMAL or none is found."""
    try:
        name = _csv_column_name(filesystem, path, index)
        kind = table_types.get(name)
        if kind is None or not pa.types.is_decimal(kind):
            return None

        def is_unfit(texts: pa.Array) -> int | None:
            for offset, text in enumerate(texts.to_pylist()):
                if text is not None and text.strip() and decimal_text_refusal(text, kind):
                    return offset
            return None

        found = _first_csv_text(filesystem, path, name, is_unfit)
    except (pa.ArrowException, OSError, IndexError):
        return None
    if found is None:
        return None
    row, text = found
    why = decimal_text_refusal(text or "", kind)
    return f"column {name!r}, row {row} ({arrow_to_sql_or_str(kind)}): {why}"


def _csv_quoted_empty(
    filesystem: pafs.FileSystem, path: str, index: int, table_types: Mapping[str, pa.DataType]
) -> str | None:
    """The refusal of the first quoted empty field (``""``) of column ``index``, with its row."""
    try:
        name = _csv_column_name(filesystem, path, index)
        found = _first_csv_text(
            filesystem, path, name, lambda texts: _index_of(texts, ""), empty_is_null=True
        )
    except (pa.ArrowException, OSError, IndexError):
        return None
    if found is None:
        return None
    return _quoted_empty_message(name, table_types.get(name), found[0])


def _quoted_empty_message(name: str, kind: pa.DataType | None, row: int) -> str:
    """A quoted empty field (``""``) in a column that holds no text, and what to do."""
    sql = "" if kind is None else f" ({arrow_to_sql_or_str(kind)})"
    return (
        f'column {name!r}{sql}, row {row}: the field is an empty string ("" or spaces), '
        "which is no value of this column; leave the field empty, without quotes or spaces, "
        "for NULL"
    )


_ARROW_CONVERSION_TARGET = re.compile(r"(CSV conversion error to )([^:]+)(:)")


def _with_table_type_names(detail: str, table_types: Mapping[str, pa.DataType]) -> str:
    """Arrow's conversion message with the table's type names (``DATE``, not ``date32[day]``)."""
    names = {str(kind): arrow_to_sql_or_str(kind) for kind in table_types.values()}
    return _ARROW_CONVERSION_TARGET.sub(
        lambda m: m.group(1) + names.get(m.group(2), m.group(2)) + m.group(3), detail
    )


def _csv_column_label(filesystem: pafs.FileSystem, path: str, index: int) -> str:
    """Column ``index`` (Arrow's, counted from 0) by its name in the header, or by its place
    counted from 1 when the header cannot be read again."""
    try:
        return f"column {_csv_column_name(filesystem, path, index)!r}"
    except (pa.ArrowException, OSError, IndexError):
        return f"column {index + 1} of the file"


# The column (counted from 0) and row Arrow's CSV reader prefixes a conversion error with.
_ARROW_CSV_COLUMN = re.compile(r"In CSV column #(\d+): (?:Row #\d+: )?")


def _csv_integers(
    batch: pa.RecordBatch, integers: Mapping[str, pa.DataType], rows_before: int, path: str
) -> pa.RecordBatch:
    """``batch`` with its integer columns (read as text) converted to their types."""
    columns = list(batch.columns)
    for index, name in enumerate(batch.schema.names):
        kind = integers.get(name)
        if kind is None:
            continue
        texts = pc.utf8_trim_whitespace(columns[index])
        try:
            # Arrow's cast also reads other spellings (``0x10``): only plain digits take it.
            if not pc.all(pc.match_substring_regex(texts, PLAIN_INTEGER_TEXT)).as_py():
                raise pa.ArrowInvalid("not plain digits")
            columns[index] = pc.cast(texts, kind)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            columns[index] = _whole_numbers(texts, kind, name, rows_before, path)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _csv_numbers(batch: pa.RecordBatch, numbers: Mapping[str, pa.DataType]) -> pa.RecordBatch:
    """``batch`` with its FLOAT, DOUBLE and DECIMAL columns (read as text) trimmed of
    surrounding whitespace and cast. Text that is no value of its column raises the error
    Arrow's CSV parser would have raised (``In CSV column #n: ...``), which the caller turns
    into a refusal naming column, row and value."""
    columns = list(batch.columns)
    for index, name in enumerate(batch.schema.names):
        kind = numbers.get(name)
        if kind is None:
            continue
        texts = columns[index]
        try:
            columns[index] = pc.cast(texts, kind)
            continue
        except pa.ArrowInvalid:
            texts = pc.utf8_trim_whitespace(texts)
        try:
            columns[index] = pc.cast(texts, kind)
        except pa.ArrowInvalid as e:
            if pa.types.is_decimal(kind):
                raise pa.ArrowInvalid(f"In CSV column #{index}: {e}") from e
            for offset, text in enumerate(texts.to_pylist()):
                try:
                    pc.cast(pa.array([text], pa.string()), kind)
                except pa.ArrowInvalid:
                    raw = columns[index][offset].as_py()
                    raise pa.ArrowInvalid(
                        f"In CSV column #{index}: CSV conversion error to {kind}: invalid value "
                        f"'{raw}'"
                    ) from e
            raise
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _refuse_changed_floats(
    filesystem: pafs.FileSystem,
    path: str,
    batch: pa.RecordBatch,
    floats: Mapping[str, pa.DataType],
    zeros_checked: set[str],
) -> None:
    """Refuse a number Arrow's parser changed on its way into a FLOAT or DOUBLE column: one too
    large (``1e400``, read as infinity; the words ``inf`` and ``-inf`` keep their meaning) or
    too small (``1e-400``, read as 0), or an integer beyond those the column holds exactly
    (rounded; a dict's is refused). Only a batch holding such a magnitude reads its column's
    text again; for zeros, only the first such batch of a file (``zeros_checked``, updated here,
    names the columns whose whole text was already looked at)."""
    for name, kind in floats.items():
        if name not in batch.schema.names:
            continue
        column = batch.column(name)
        # Infinities are beyond the limit too.
        large = pc.greater_equal(pc.abs(column), float(FLOAT_EXACT_INTEGERS[kind]))
        if kind == pa.float32():
            # A subnormal FLOAT keeps only a few bits of the number it was parsed from.
            tiny = pc.and_(pc.less(pc.abs(column), _SMALLEST_NORMAL_FLOAT), pc.not_equal(column, 0))
            large = pc.or_(large, tiny)
        zeros = name not in zeros_checked and pc.any(pc.equal(column, 0)).as_py()
        if not (zeros or pc.any(pc.fill_null(large, False)).as_py()):
            continue
        if zeros:
            zeros_checked.add(name)

        def changed(texts: pa.Array, name: str = name, kind: pa.DataType = kind) -> int | None:
            for offset, text in enumerate(texts.to_pylist()):
                if text is not None and _float_text_refusal(name, text.strip(), kind):
                    return offset
            return None

        found = _first_csv_text(filesystem, path, name, changed)
        if found is not None:
            row, text = found
            message = _float_text_refusal(name, str(text).strip(), kind)
            head, _, tail = str(message).partition(": ")
            raise TypeMismatchError(f"{path!r}: {head}, row {row}: {tail}. Nothing was written")


def _float_text_refusal(name: str, text: str, kind: pa.DataType) -> str | None:
    """Why the number ``text`` does not go into float column ``name`` as written, or None."""
    if _overflows(text, kind):
        return float_overflow_message(name, kind, text)
    if inexact_integer(text, kind):
        return inexact_integer_message(name, kind, text)
    if _underflows(text, kind):
        return float_underflow_message(name, kind, text)
    if kind == pa.float32() and DECIMAL_NUMBER_TEXT.fullmatch(text):
        value = float(text)
        stored = pa.scalar(value).cast(pa.float32(), safe=False).as_py()
        if abs(stored - value) > abs(value) * FLOAT_RELATIVE_ERROR:
            return (
                f"column {name!r} (FLOAT): value {text!r} does not fit, a FLOAT would hold it "
                f"as {stored!r} (FLOAT keeps magnitudes from about 1.2e-38 to 3.4e38 to 7 "
                "digits); make the column DOUBLE or convert the value before writing"
            )
    return None


# FLOAT's smallest normal magnitude: below it a FLOAT keeps fewer than 24 bits.
_SMALLEST_NORMAL_FLOAT = 2.0**-126


def _underflows(text: str, kind: pa.DataType) -> bool:
    """Whether ``text`` is a number with a nonzero digit that float type ``kind`` holds as 0."""
    if not re.fullmatch(NONZERO_NUMBER_TEXT, text):
        return False
    value = float(text)
    if kind == pa.float32():
        return bool(pa.scalar(value).cast(pa.float32(), safe=False).as_py() == 0)
    return value == 0


def _overflows(text: str, kind: pa.DataType) -> bool:
    """Whether ``text`` is a number (not the word inf) too large for float type ``kind``."""
    if not DECIMAL_NUMBER_TEXT.fullmatch(text):
        return False
    value = float(text)
    if kind == pa.float32():
        return bool(pc.is_inf(pa.scalar(value).cast(pa.float32(), safe=False)).as_py())
    return value in (float("inf"), float("-inf"))


def _is_binary(kind: pa.DataType) -> bool:
    return bool(
        pa.types.is_binary(kind)
        or pa.types.is_large_binary(kind)
        or pa.types.is_fixed_size_binary(kind)
    )


def _csv_blobs(
    batch: pa.RecordBatch, blobs: Mapping[str, pa.DataType], rows_before: int
) -> pa.RecordBatch:
    """``batch`` with its BLOB columns (read as text) decoded from hex."""
    columns = list(batch.columns)
    for index, name in enumerate(batch.schema.names):
        kind = blobs.get(name)
        if kind is None:
            continue
        values: list[bytes | None] = []
        for offset, text in enumerate(columns[index].to_pylist()):
            if text is None:
                values.append(None)
                continue
            hex_text = text.strip(" \t")  # padded cells, as numbers in other columns may be
            if not _HEX_TEXT.fullmatch(hex_text) or (text and not hex_text):
                raise pa.ArrowInvalid(
                    f"column {name!r}, row {rows_before + offset + 1}: {_shown_text(text)} is "
                    "not hex; a BLOB value in CSV is written as hex digits (48656c6c6f for "
                    "b'Hello'), as `ledger sql` prints it"
                )
            values.append(bytes.fromhex(hex_text))
        columns[index] = pa.array(values, kind)
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


_HEX_TEXT = re.compile(r"(?:[0-9a-fA-F]{2})*")


def _csv_timestamps(
    batch: pa.RecordBatch,
    timestamps: Mapping[str, pa.DataType],
    rows_before: int,
    path: str,
    nanosecond_columns: set[str],
) -> pa.RecordBatch:
    """``batch`` with its timestamp columns (read as text) parsed into their types.

    A column keeps microseconds, as an Arrow or pandas timestamp converted into it does:
    nanosecond digits that are zeros (``05.123456000``, as many writers print every value)
    are dropped, and nonzero ones (``05.123456789``) are refused with
    :class:`TypeMismatchError` naming the value, since storing them would change it.
    ``nanosecond_columns`` (updated here) names the columns of the file already seen written
    with nanosecond digits."""
    columns = list(batch.columns)
    for index, name in enumerate(batch.schema.names):
        kind = timestamps.get(name)
        if kind is not None:
            texts = pc.utf8_trim_whitespace(columns[index])
            try:
                columns[index] = _parsed_timestamps(texts, kind, name, nanosecond_columns)
            except pa.ArrowInvalid:
                _refuse_first_timestamp(texts, kind, name, rows_before, path)
                raise
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _csv_dates(
    batch: pa.RecordBatch, dates: Mapping[str, pa.DataType], rows_before: int, path: str
) -> pa.RecordBatch:
    """``batch`` with its DATE columns (read as text) parsed by the rule every source follows
    (``schema.dates_from_text``: a date, or a timestamp at midnight). Text that is neither is
    refused as the CSV reader refuses it; a timestamp with a time of day with
    :class:`TypeMismatchError` naming the file, column, row and value."""
    columns = list(batch.columns)
    for index, name in enumerate(batch.schema.names):
        kind = dates.get(name)
        if kind is None:
            continue
        texts = pc.utf8_trim_whitespace(columns[index])
        try:
            columns[index] = dates_from_text(name, texts, kind)
        except (pa.ArrowInvalid, TypeMismatchError) as e:
            for offset, text in enumerate(texts.to_pylist()):
                if text is None:
                    continue
                row = rows_before + offset + 1
                if not text:
                    raise pa.ArrowInvalid(_quoted_empty_message(name, kind, row)) from e
                try:
                    dates_from_text(name, pa.array([text]), kind)
                except pa.ArrowInvalid:
                    raise pa.ArrowInvalid(
                        f"column {name!r}, row {row}: CSV conversion error to "
                        f"{arrow_to_sql_or_str(kind)}: invalid value {text!r}"
                    ) from e
                except TypeMismatchError as refused:
                    head, _, tail = str(refused).partition(": ")
                    raise TypeMismatchError(
                        f"{path!r}: {head}, row {row}: {tail}. Nothing was written"
                    ) from e
            raise
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _csv_booleans(
    batch: pa.RecordBatch, booleans: Collection[str], rows_before: int
) -> pa.RecordBatch:
    """``batch`` with its BOOLEAN columns (read as text) trimmed and cast, as text from every
    other source is; text that is no boolean is refused naming its column, row and value."""
    columns = list(batch.columns)
    for index, name in enumerate(batch.schema.names):
        if name not in booleans:
            continue
        texts = pc.utf8_trim_whitespace(columns[index])
        try:
            columns[index] = pc.cast(texts, pa.bool_())
        except pa.ArrowInvalid as e:
            for offset, text in enumerate(texts.to_pylist()):
                if text is None:
                    continue
                row = rows_before + offset + 1
                if not text:
                    raise pa.ArrowInvalid(_quoted_empty_message(name, pa.bool_(), row)) from e
                try:
                    pc.cast(pa.array([text]), pa.bool_())
                except pa.ArrowInvalid:
                    raise pa.ArrowInvalid(
                        f"column {name!r}, row {row}: CSV conversion error to BOOLEAN: invalid "
                        f"value {columns[index][offset].as_py()!r}"
                    ) from e
            raise
    return pa.RecordBatch.from_arrays(columns, names=batch.schema.names)


def _parsed_timestamps(
    texts: pa.Array, kind: pa.DataType, name: str, nanosecond_columns: set[str]
) -> pa.Array:
    """``texts`` parsed by the rule every source follows (``schema.timestamps_from_text``).
    A failed parse costs far more than a successful one: once a column shows nanosecond digits,
    its later batches drop them before parsing instead of failing first."""
    if name not in nanosecond_columns:
        try:
            parsed: pa.Array = pc.cast(texts, kind)
            return parsed
        except pa.ArrowInvalid:
            nanosecond_columns.add(name)
    exact: pa.Array = pc.cast(without_zero_nanoseconds(texts), kind)
    return exact


def _refuse_first_timestamp(
    texts: pa.Array, kind: pa.DataType, name: str, rows_before: int, path: str
) -> None:
    """Raise the error for the first of ``texts`` that does not parse into ``kind``."""
    for offset, text in enumerate(texts.to_pylist()):
        refusal = None if text is None else timestamp_refusal(text, kind)
        if refusal is None:
            continue
        row = rows_before + offset + 1
        if not text.strip():
            raise pa.ArrowInvalid(_quoted_empty_message(name, kind, row))
        if refusal == BELOW_MICROSECONDS:
            sql = arrow_to_sql_or_str(kind)
            raise TypeMismatchError(
                f"{path!r}: column {name!r} ({sql}), row {row}: value {text!r} does not fit: a "
                f"{sql} keeps microseconds (6 digits after the second) and the digits after "
                "them are not zeros; round the value to microseconds in the file. Nothing was "
                "written"
            )
        if refusal == NO_OFFSET:
            raise pa.ArrowInvalid(_naive_timestamp_advice(name, f", row {row}", text))
        problem = "expected no zone offset in" if refusal == OFFSET else "invalid value"
        raise pa.ArrowInvalid(
            f"column {name!r}, row {row}: CSV conversion error to {arrow_to_sql_or_str(kind)}: "
            f"{problem} {text!r}"
        )


def _shown_text(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _whole_numbers(
    texts: pa.Array, kind: pa.DataType, name: str, rows_before: int, path: str
) -> pa.Array:
    """Integer column ``name`` from text where some values are not plain digits: each must be a
    whole number (``1.0``, ``-2.00``, ``1e3``) within the column's range. A number out of the
    range is refused as from every other source (:class:`TypeMismatchError`)."""
    sql = arrow_to_sql_or_str(kind)
    values: list[int | None] = []
    for offset, text in enumerate(texts.to_pylist()):
        if text is None:
            values.append(None)
            continue
        where = f"column {name!r}, row {rows_before + offset + 1}"
        if not text:
            raise pa.ArrowInvalid(_quoted_empty_message(name, kind, rows_before + offset + 1))
        number = decimal.Decimal(text) if DECIMAL_NUMBER_TEXT.fullmatch(text) else None
        if number is None or (number.adjusted() < 40 and number != number.to_integral_value()):
            raise pa.ArrowInvalid(
                f"{where}: {text!r} is not a whole number, and the column is {sql}"
            )
        if number.adjusted() >= 40:  # no integer column holds 40 digits: never expanded
            raise _out_of_range(path, name, kind, rows_before + offset + 1, text)
        if (
            abs(number) >= FLOAT_EXACT_INTEGERS[pa.float64()]
            and re.fullmatch(PLAIN_INTEGER_TEXT, text) is None
        ):
            raise TypeMismatchError(
                f"{path!r}: {float_text_message(name, kind, text)} (row {rows_before + offset + 1})"
            )
        values.append(int(number))
    try:
        return pa.array(values, kind)
    except (OverflowError, pa.ArrowInvalid):
        low, high = _integer_range(kind)
        for offset, value in enumerate(values):
            if value is not None and not low <= value <= high:
                raise _out_of_range(
                    path, name, kind, rows_before + offset + 1, str(value)
                ) from None
        raise


def _out_of_range(path: str, name: str, kind: pa.DataType, row: int, value: str) -> LedgerError:
    """An integer out of its column's range, as a list of dicts gets it, with the file and row."""
    return TypeMismatchError(
        f"{path!r}: column {name!r} ({arrow_to_sql_or_str(kind)}), row {row}: value {value} is "
        "out of its range. Nothing was written"
    )


def _integer_range(kind: pa.DataType) -> tuple[int, int]:
    bits = kind.bit_width
    if pa.types.is_signed_integer(kind):
        return -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    return 0, (1 << bits) - 1


_CSV_CONVERSION_ERROR = re.compile(
    r"In CSV column #(\d+): (?:Row #\d+: )?"
    r"(?:CSV conversion error to [^:]+: invalid value '(.*)'$|The string '(.*)' is not a valid)",
    re.DOTALL,
)


_CSV_NAIVE_TIMESTAMP_ERROR = re.compile(
    r"In CSV column #(\d+): (?:Row #\d+: )?CSV conversion error to timestamp\[[^\]]*tz=[^\]]*\]: "
    r"expected a zone offset in '(.*?)'",
    re.DOTALL,
)
_CSV_RESCALE_ERROR = re.compile(
    r"In CSV column #(\d+): (?:Row #\d+: )?Rescaling Decimal value would cause data loss"
)


def _csv_error_row(
    filesystem: pafs.FileSystem,
    path: str,
    message: str,
    table_types: Mapping[str, pa.DataType] | None = None,
) -> str | None:
    """Where in the file the value Arrow's CSV reader refused is: its column's name and its row
    (counted from 1 after the header), found by reading that column again as text. None when
    the message is not a conversion error or the value is not found."""
    naive = _CSV_NAIVE_TIMESTAMP_ERROR.search(message)
    if naive is not None:
        return _csv_naive_timestamp(filesystem, path, int(naive.group(1)), naive.group(2))
    match = _CSV_CONVERSION_ERROR.search(message)
    rescale = _CSV_RESCALE_ERROR.search(message)
    if match is None and rescale is None:
        return None
    if match is None:
        assert rescale is not None
        return _csv_rounded_decimal(filesystem, path, int(rescale.group(1)), table_types or {})
    index, value = int(match.group(1)), match.group(2) or match.group(3)

    def is_refused(texts: pa.Array) -> int | None:
        found = pc.index(texts, value).as_py()
        return found if found >= 0 else None

    try:
        name = _csv_column_name(filesystem, path, index)
        found = _first_csv_text(filesystem, path, name, is_refused)
    except (pa.ArrowException, OSError, IndexError):
        return None
    return None if found is None else f"column {name!r}, row {found[0]}"


def _csv_naive_timestamp(
    filesystem: pafs.FileSystem, path: str, index: int, value: str
) -> str | None:
    """Where a timestamp without offset sits in a TIMESTAMPTZ column, and what to do."""
    try:
        name = _csv_column_name(filesystem, path, index)
        found = _first_csv_text(filesystem, path, name, lambda texts: _index_of(texts, value))
    except (pa.ArrowException, OSError, IndexError):
        return None
    row = "" if found is None else f", row {found[0]}"
    return _naive_timestamp_advice(name, row, value)


def _naive_timestamp_advice(name: str, row: str, value: str) -> str:
    return (
        f"column {name!r}{row}: {value!r} has no UTC offset, and a TIMESTAMPTZ column stores "
        "instants: write the offset in the file (e.g. '2026-01-03 10:00:00+00:00' or a "
        "trailing 'Z'), or make the column TIMESTAMP"
    )


def _index_of(texts: pa.Array, value: str) -> int | None:
    """The offset of the first text that is ``value`` once its surrounding spaces are
    dropped (as the CSV reader drops them)."""
    found = pc.index(pc.utf8_trim_whitespace(texts), value).as_py()
    return found if found >= 0 else None


def _csv_rounded_decimal(
    filesystem: pafs.FileSystem, path: str, index: int, table_types: Mapping[str, pa.DataType]
) -> str | None:
    """The first value of DECIMAL column ``index`` with more decimal places than its scale."""
    try:
        name = _csv_column_name(filesystem, path, index)
        kind = table_types.get(name)
        if not isinstance(kind, pa.Decimal128Type | pa.Decimal256Type):
            return None
        scale = kind.scale

        def is_rounded(texts: pa.Array) -> int | None:
            for offset, text in enumerate(texts.to_pylist()):
                if text is not None and _decimal_places(text) > scale:
                    return offset
            return None

        found = _first_csv_text(filesystem, path, name, is_rounded)
    except (pa.ArrowException, OSError, IndexError):
        return None
    if found is None:
        return None
    row, text = found
    return (
        f"column {name!r}, row {row}: {text!r} has more than {scale} decimal place(s) for "
        f"{arrow_to_sql_or_str(kind)}; round it in the file"
    )


def _decimal_places(text: str) -> int:
    """Decimal places written in ``text`` (0 for text that is no number)."""
    try:
        exponent = decimal.Decimal(text.strip()).as_tuple().exponent
    except decimal.InvalidOperation:
        return 0
    return -exponent if isinstance(exponent, int) else 0


def _open_csv_text(
    source: pa.NativeFile, columns: list[str], *, empty_is_null: bool = False
) -> pacsv.CSVStreamingReader:
    """A reader of ``columns`` of a CSV file as text, split as :func:`_csv_batches` splits it;
    with ``empty_is_null``, an empty unquoted field is NULL (a quoted one stays ``""``), as
    :func:`_csv_batches` reads them."""
    nulls: dict[str, Any] = (
        {"null_values": [""], "strings_can_be_null": True, "quoted_strings_can_be_null": False}
        if empty_is_null
        else {}
    )
    return pacsv.open_csv(
        source,
        read_options=pacsv.ReadOptions(block_size=TEXT_BLOCK_BYTES),
        parse_options=pacsv.ParseOptions(newlines_in_values=True),
        convert_options=pacsv.ConvertOptions(
            column_types=dict.fromkeys(columns, pa.string()), include_columns=columns, **nulls
        ),
    )


def _csv_column_name(filesystem: pafs.FileSystem, path: str, index: int) -> str:
    """The name of the CSV file's column ``index``, from its header (no values are read)."""
    with _open_stream(filesystem, path) as source:
        return str(_open_csv_text(source, []).schema.names[index])


def _first_csv_text(
    filesystem: pafs.FileSystem,
    path: str,
    name: str,
    find: Callable[[pa.Array], int | None],
    *,
    empty_is_null: bool = False,
) -> tuple[int, str | None] | None:
    """The first value of column ``name``, read as text, that ``find`` points at in its batch
    (``find`` returns an offset or None): its row, counted from 1 after the header, and its
    text. The file is open only inside this call, so nothing is left for a garbage collector
    to close."""
    with _open_stream(filesystem, path) as source:
        seen = 0
        for batch in _open_csv_text(source, [name], empty_is_null=empty_is_null):
            texts = batch.column(0)
            offset = find(texts)
            if offset is not None:
                return seen + offset + 1, texts[offset].as_py()
            seen += batch.num_rows
    return None


def _json_batches(
    filesystem: pafs.FileSystem, path: str, table_types: Mapping[str, pa.DataType]
) -> Iterator[pa.RecordBatch]:
    """:func:`_json_batches_of`, its errors naming the line of the file they are on."""
    batches = _json_batches_of(filesystem, path, table_types)
    return _at_json_line(filesystem, path, table_types, batches)


def _json_batches_of(
    filesystem: pafs.FileSystem, path: str, table_types: Mapping[str, pa.DataType]
) -> Iterator[pa.RecordBatch]:
    """JSON lines parsed into the types of the table's columns the file names (a column the
    file does not name stays absent, so an upsert keeps its values). A column the file holds as
    text stays text here, and is parsed into its column's type by the rule every source follows
    (``ledger.schema.parse_text``): the JSON reader itself takes ``"19.99"`` for a DECIMAL but
    refuses ``"7"`` for an integer and ``"2024-02-29"`` for a DATE."""
    typed = _json_schema(filesystem, path, table_types)
    if typed is None:
        return
    parse = pajson.ParseOptions(explicit_schema=typed, unexpected_field_behavior="infer")
    read_options = pajson.ReadOptions(block_size=TEXT_BLOCK_BYTES)
    rows_read = 0
    try:
        with _open_stream(filesystem, path) as source:
            for batch in pajson.open_json(source, read_options=read_options, parse_options=parse):
                yield batch
                rows_read += batch.num_rows
        return
    except pa.ArrowInvalid as e:
        if _json_mixed_column(str(e), table_types) is None and not _varchar_number_too_big(
            str(e), table_types
        ):
            raise
    # A column mixes JSON kinds (a number or boolean in a VARCHAR column, or numbers and text
    # in another) somewhere past the rows already read: the rest of the file is read again
    # block by block, such values taken as their JSON text (see _json_block). Only a file
    # that mixes kinds pays for it, and only a block at a time.
    lines_before = 0
    mixed: set[str] = set()
    for block in _line_blocks(filesystem, path):
        rows = sum(1 for line in block.splitlines() if line.strip())
        if rows <= rows_read:
            rows_read -= rows
        else:
            table = _json_block(filesystem, path, block, typed, table_types, lines_before, mixed)
            yield from table.slice(rows_read).to_batches()
            rows_read = 0
        lines_before += block.count(b"\n")


def _json_schema(
    filesystem: pafs.FileSystem, path: str, table_types: Mapping[str, pa.DataType]
) -> pa.Schema | None:
    """The types a JSON-lines file is read into: the table's types for the columns its first
    block names (text stays text, parsed later by the rule every source follows), inferred
    types for the others. None for a file of blank lines alone, which holds no rows, as a
    file of zero bytes holds none."""
    read_options = pajson.ReadOptions(block_size=TEXT_BLOCK_BYTES)
    try:
        with _open_stream(filesystem, path) as source:
            inferred = pajson.open_json(source, read_options=read_options).schema
    except pa.ArrowInvalid as e:
        if _EMPTY_JSON_STREAM.fullmatch(str(e)) and _holds_blank_lines_alone(filesystem, path):
            return None
        if _json_mixed_column(str(e), table_types) is not None or _varchar_number_too_big(
            str(e), table_types
        ):
            inferred = _text_block_schema(filesystem, path, table_types)
        elif _starts_with_array(filesystem, path):
            raise pa.ArrowInvalid(
                "the file holds one JSON array, and JSON files are read as JSON lines (one "
                "object per line); turn it into lines (jq -c '.[]' in.json > out.jsonl) or "
                "json.load it and pass the list"
            ) from e
        else:
            raise
    return pa.schema(
        [
            pa.field(f.name, pa.string())
            if _is_json_text(f.type)
            else pa.field(f.name, _json_read_type(table_types.get(f.name, f.type)))
            for f in inferred
        ]
    )


# How Arrow's JSON reader refuses a stream of no object (blank lines alone, or none).
_EMPTY_JSON_STREAM = re.compile(r"Empty JSON stream")


def _holds_blank_lines_alone(filesystem: pafs.FileSystem, path: str) -> bool:
    """Whether the file holds nothing but white space (and a UTF-8 byte order mark); read
    only once Arrow's reader found no object in it."""
    with _open_stream(filesystem, path) as source:
        head = True
        while chunk := bytes(source.read(TEXT_BLOCK_BYTES)):
            if head:
                chunk, head = chunk.removeprefix(b"\xef\xbb\xbf"), False
            if chunk.strip():
                return False
    return True


def _text_block_schema(
    filesystem: pafs.FileSystem, path: str, table_types: Mapping[str, pa.DataType]
) -> pa.Schema:
    """The types inferred from the file's first block once the values of its columns that mix
    JSON kinds (and its VARCHAR columns' numbers and booleans) are text."""
    block = next(_line_blocks(filesystem, path), b"")
    return _json_block(filesystem, path, block, pa.schema([]), table_types, 0, set()).schema


def _json_block(
    filesystem: pafs.FileSystem,
    path: str,
    block: bytes,
    typed: pa.Schema,
    table_types: Mapping[str, pa.DataType],
    lines_before: int,
    mixed: set[str],
) -> pa.Table:
    """A block of JSON lines read into ``typed``, where Arrow's reader refuses a column whose
    values mix JSON kinds. A VARCHAR column's numbers and booleans are taken as their JSON text
    (:func:`_with_json_text`); a column of another type that mixes numbers, booleans and text
    (an event feed's ``1.5`` and ``"1.50"``; ``mixed``, updated here, holds those found) is read
    as text, each number as written, and parsed into its column's type by the rule for text
    (``ledger.schema.parse_text``), as a list of dicts holding the same values converts them,
    then held in the type ``typed`` gives it, as in the blocks read before."""
    textual = bool(mixed)
    while True:
        schema = pa.schema([f for f in typed if f.name not in mixed])
        parse = pajson.ParseOptions(explicit_schema=schema, unexpected_field_behavior="infer")
        source = (
            _with_json_text(block, table_types, path, lines_before, mixed) if textual else block
        )
        try:
            table = pajson.read_json(pa.BufferReader(source), parse_options=parse)
            break
        except pa.ArrowInvalid as e:
            name = _json_mixed_column(str(e), table_types)
            if name is None:
                # A number too large for a double, maybe a VARCHAR column's (stored as its
                # text, as every other number there): read once more with those as text.
                if textual or not _varchar_number_too_big(str(e), table_types):
                    raise
                textual = True
                continue
            if textual and (name in mixed or _is_varchar(table_types[name])):
                raise
            textual = True
            if not _is_varchar(table_types[name]):
                mixed.add(name)
    for name in mixed:
        if name not in table.column_names or name not in typed.names:
            continue
        kind = typed.field(name).type
        if pa.types.is_string(kind):
            continue  # text in the blocks before too: parsed when written
        index = table.column_names.index(name)
        parsed = _parsed_json_text(filesystem, path, name, table.column(index), table_types[name])
        table = table.set_column(index, name, parsed.cast(kind))
    return table


def _parsed_json_text(
    filesystem: pafs.FileSystem,
    path: str,
    name: str,
    texts: pa.ChunkedArray,
    target: pa.DataType,
) -> pa.ChunkedArray:
    """JSON text of column ``name`` (numbers, booleans and text mixed, all taken as text)
    parsed into ``target``; the first refused value named as the single-kind reading names
    it: its JSON kind, its value and its own line."""
    try:
        return parse_text(name, texts, target)
    except TypeMismatchError as e:
        found = _first_json_value(
            filesystem, path, name, lambda value: _text_refusal(name, value, target) is not None
        )
        if found is None:
            raise TypeMismatchError(f"{path!r}: {e}") from e
        value, where = found
        raise _json_value_refusal(path, name, target, value, where) from e


def _text_refusal(name: str, value: Any, target: pa.DataType) -> TypeMismatchError | None:
    """The refusal of a JSON number, boolean or text for column ``name``, taken as text (None
    when it parses, or is an object or array, left for the reader)."""
    if isinstance(value, dict | list):
        return None
    text = value if isinstance(value, str) else _json_text(value)
    try:
        parse_text(name, pa.chunked_array([[str.__str__(text)]], pa.string()), target)
    except TypeMismatchError as refused:
        return refused
    return None


def _json_value_refusal(
    path: str, name: str, target: pa.DataType, value: Any, where: str
) -> TypeMismatchError:
    """The refusal of one JSON value of a column mixing kinds, worded as a column holding only
    its kind words it: text by the rule for text, a number in the column's own terms."""
    refused = _text_refusal(name, value, target)
    sql = arrow_to_sql_or_str(target)
    if isinstance(value, bool):
        return TypeMismatchError(
            f"{path!r}: column {name!r} ({sql}): value {_json_text(value)} is a JSON boolean, "
            f"and {an(sql)} column takes no boolean: write a number ({where})"
        )
    if not isinstance(value, _JsonNumber):
        return TypeMismatchError(f"{path!r}: {refused} ({where})")
    text = str.__str__(value)
    if pa.types.is_integer(target):
        if _integer_unfit(text, target):
            return _json_out_of_range(path, name, target, text, where)
        if decimal.Decimal(text) != decimal.Decimal(text).to_integral_value():
            return TypeMismatchError(
                f"{path!r}: column {name!r} ({sql}): value {text} is a JSON number that is not "
                f"a whole number, and an integer column takes whole numbers ({where})"
            )
        return TypeMismatchError(f"{path!r}: {float_text_message(name, target, text)} ({where})")
    if pa.types.is_decimal(target):
        if _decimal_places_unfit(text, target):
            return TypeMismatchError(
                f"{path!r}: column {name!r} ({sql}): value {text} has more than "
                f"{target.scale} decimal place(s); round it in the file ({where})"
            )
        return _json_number_unfit(path, name, target, text, where)
    if pa.types.is_floating(target):
        if inexact_integer(text, target):
            message = inexact_integer_message(name, target, text)
        elif _underflows(text, target):
            message = float_underflow_message(name, target, text)
        else:
            message = float_overflow_message(name, target, text)
        return TypeMismatchError(f"{path!r}: {message} ({where})")
    return TypeMismatchError(
        f"{path!r}: column {name!r} ({sql}): value {text} is a JSON number that does not fit "
        f"({refused}) ({where})"
    )


def _varchar_number_too_big(message: str, table_types: Mapping[str, pa.DataType]) -> bool:
    """Whether Arrow's reader refused a number too large for a double in a file for a table
    with a VARCHAR column, which takes such a number as its JSON text."""
    return bool(_JSON_TOO_BIG_FOR_DOUBLE.search(message)) and any(
        _is_varchar(kind) for kind in table_types.values()
    )


def _is_varchar(kind: pa.DataType) -> bool:
    return bool(pa.types.is_string(kind) or pa.types.is_large_string(kind))


def _json_read_type(kind: pa.DataType) -> pa.DataType:
    """A FLOAT column's numbers are read as doubles: Arrow's reader would turn 1e39 into a
    FLOAT infinity unchecked, while a double goes into the FLOAT under the rules of every
    source (refused when it overflows). An integer column's numbers are read as
    DECIMAL(38,0), which takes a whole number however it is written (``3``, ``3.0``,
    ``3e0``) and refuses a fraction; :func:`_json_integers` then applies the rule for floats
    to those written with a point or an exponent, and the column's range. A DATE column is
    read as text."""
    if pa.types.is_integer(kind):
        return _JSON_INTEGER_READ
    if pa.types.is_date(kind):
        # Arrow's reader takes a number for a date as days since 1970; a DATE is read from
        # text only, so a number is refused as a JSON number (``_json_time_number``).
        return pa.string()
    return pa.float64() if kind == pa.float32() else kind


_JSON_INTEGER_READ = pa.decimal128(38, 0)


def _json_integers(
    filesystem: pafs.FileSystem,
    path: str,
    table_types: Mapping[str, pa.DataType],
    item: Any,
    checked: set[str],
) -> Any:
    """``item`` (a batch or :class:`Rows`) with its integer columns (read as DECIMAL(38,0))
    in their types. A number written as a float (with a point or an exponent) goes in only
    below 2**53 in magnitude, as a float does from every source: a batch holding a larger value
    has its column's text looked at once per file (``checked``, updated here). A number out of
    the column's range is refused as from a dict, naming its line."""
    table = item.table if isinstance(item, Rows) else item
    columns = list(table.columns)
    changed = False
    for index, name in enumerate(table.schema.names):
        kind = table_types.get(name)
        if (
            kind is None
            or not pa.types.is_integer(kind)
            or columns[index].type != _JSON_INTEGER_READ
        ):
            continue
        column = columns[index]
        large = pc.greater_equal(
            pc.abs(column), pa.scalar(FLOAT_EXACT_INTEGERS[pa.float64()], _JSON_INTEGER_READ)
        )
        if name not in checked and pc.any(pc.fill_null(large, False)).as_py():
            checked.add(name)
            found = _first_json_number(filesystem, path, [name], _big_float_text)
            if found is not None:
                _, text, where = found
                if _integer_unfit(text, kind):
                    raise _json_out_of_range(path, name, kind, text, where)
                raise TypeMismatchError(
                    f"{path!r}: {float_text_message(name, kind, text)} ({where})"
                )
        try:
            columns[index] = pc.cast(column, kind)
        except pa.ArrowInvalid:
            found = _first_json_number(filesystem, path, [name], _out_of_range_of(kind))
            if found is None:
                raise
            _, text, where = found
            raise _json_out_of_range(path, name, kind, text, where) from None
        changed = True
    if not changed:
        return item
    converted = type(table).from_arrays(columns, names=table.schema.names)
    return Rows(converted, item.given) if isinstance(item, Rows) else converted


def _json_out_of_range(
    path: str, name: str, kind: pa.DataType, text: str, where: str
) -> TypeMismatchError:
    """The refusal of JSON number ``text``, outside integer column ``name``'s range."""
    sql = arrow_to_sql_or_str(kind)
    low, high = _integer_range(kind)
    return TypeMismatchError(
        f"{path!r}: column {name!r} ({sql}): value {text} is out of its range ({an(sql)} holds "
        f"whole numbers from {low} to {high}); fix the value or widen the column ({where})"
    )


def _out_of_range_of(kind: pa.DataType) -> Callable[[str, str], bool]:
    def unfit(text: str, _: str) -> bool:
        return _integer_unfit(text, kind)

    return unfit


def _big_float_text(text: str, _: str) -> bool:
    """Whether ``text`` is a number written as a float whose magnitude is 2**53 or more."""
    return (
        INTEGER_TEXT.fullmatch(text) is None
        and abs(decimal.Decimal(text)) >= FLOAT_EXACT_INTEGERS[pa.float64()]
    )


def _json_rows_with_presence(
    filesystem: pafs.FileSystem, path: str, table_types: Mapping[str, pa.DataType]
) -> Iterator[Rows]:
    """:func:`_json_rows_of`, its errors naming the line of the file they are on."""
    return _at_json_line(
        filesystem, path, table_types, _json_rows_of(filesystem, path, table_types)
    )


def _json_rows_of(
    filesystem: pafs.FileSystem, path: str, table_types: Mapping[str, pa.DataType]
) -> Iterator[Rows]:
    """JSON lines as :class:`Rows` that say, line by line, which columns each line gives: a
    key absent from a line keeps that row's value in an upsert, an explicit ``null`` sets
    NULL, as for a list of dicts. Values are parsed by the same reader and types as
    :func:`_json_batches` (so a file stores the same values whatever the operation); only the
    keys of each line are read with :mod:`json`. Lines are taken in blocks of about
    ``TEXT_BLOCK_BYTES``, so memory per block stays bounded."""
    typed = _json_schema(filesystem, path, table_types)
    if typed is None:
        return
    lines_before = 0
    mixed: set[str] = set()
    for block in _line_blocks(filesystem, path):
        table = _json_block(filesystem, path, block, typed, table_types, lines_before, mixed)
        lines_before += block.count(b"\n")
        shapes = [_keys_of_line(line) for line in block.splitlines() if line.strip()]
        if len(shapes) != table.num_rows:
            raise pa.ArrowInvalid("JSON parse error: a line holds no object; write one per line")
        yield Rows(table, _presence_masks(table.column_names, shapes))


def _json_mixed_column(message: str, table_types: Mapping[str, pa.DataType]) -> str | None:
    """The table column on whose value of another kind Arrow's JSON reader failed, if it is
    one that takes numbers and text alike: text, a number or a boolean column (a date or
    timestamp column takes no number, and is refused asking for text)."""
    change = _JSON_KIND_CHANGE.search(message)
    if change is None:
        return None
    name = change.group(1).lstrip("/")
    kind = table_types.get(name)
    if kind is None or not (
        _is_varchar(kind)
        or pa.types.is_integer(kind)
        or pa.types.is_floating(kind)
        or pa.types.is_decimal(kind)
        or pa.types.is_boolean(kind)
    ):
        return None
    return name


def _with_json_text(
    block: bytes,
    table_types: Mapping[str, pa.DataType],
    path: str,
    lines_before: int,
    mixed: Collection[str] = (),
) -> bytes:
    """``block`` with the numbers and booleans its lines give VARCHAR columns turned into their
    JSON text as written (``1.50`` stays ``"1.50"``, ``true`` is ``"true"``), as a list of dicts
    stores them, and so are those of the ``mixed`` columns. An object or array for a VARCHAR
    column is refused naming the file, line, column and value. A line that is no JSON object is
    left for Arrow's reader to refuse."""
    varchar = [name for name, kind in table_types.items() if _is_varchar(kind)]
    # A column of another type whose values mix kinds: its numbers and booleans as text too (an
    # object or array is left for Arrow's reader to refuse).
    text_columns = [*varchar, *(name for name in mixed if name not in varchar)]
    lines = block.split(b"\n")
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            row = json.loads(line, parse_float=_JsonNumber, parse_int=_JsonNumber)
        except ValueError:
            continue
        if not isinstance(row, dict):
            continue
        changed = False
        for name in text_columns:
            value = row.get(name)
            if isinstance(value, dict | list) and name in varchar:
                shown = _shown(_json_text(value).encode(), 60)
                raise TypeMismatchError(
                    f"{path!r}: column {name!r} (VARCHAR): value {shown} is a JSON "
                    f"{_json_kind(value)}, and a VARCHAR column takes text (a number or boolean "
                    "is stored as its JSON text); write the value as a JSON string, or store it "
                    f"in columns of its own (line {lines_before + index + 1}: {_shown(line)})"
                )
            if isinstance(value, _JsonNumber) and name in mixed:
                # Refused as a number alone is, where the rule for text would take it: a
                # BOOLEAN takes no number, a float no integer it would round (2**53 + 1).
                kind, text = table_types[name], str.__str__(value)
                where = f"line {lines_before + index + 1}: {_shown(line)}"
                if pa.types.is_boolean(kind):
                    raise _json_number_not_boolean(path, name, text, where)
                if pa.types.is_floating(kind) and inexact_integer(text, kind):
                    message = inexact_integer_message(name, kind, text)
                    raise TypeMismatchError(f"{path!r}: {message} ({where})")
            if isinstance(value, _JsonNumber | bool):
                row[name] = str.__str__(value) if isinstance(value, str) else _json_text(value)
                changed = True
        if changed:
            lines[index] = _json_text(row).encode()
    return b"\n".join(lines)


def _json_number_not_boolean(path: str, name: str, text: str, where: str) -> TypeMismatchError:
    """The refusal of JSON number ``text`` in BOOLEAN column ``name``, as a dict's number is."""
    return TypeMismatchError(
        f"{path!r}: column {name!r} (BOOLEAN): value {text} is a JSON number, and a BOOLEAN "
        'column takes true or false (or text such as "true"), not a number, as from every '
        f"source: write the value as true or false ({where})"
    )


def _json_text(value: Any) -> str:
    """``value`` (read with numbers as :class:`_JsonNumber`) as JSON, numbers as written."""
    if isinstance(value, _JsonNumber):
        return str.__str__(value)
    if isinstance(value, dict):
        items = ",".join(f"{json.dumps(k)}:{_json_text(v)}" for k, v in value.items())
        return "{" + items + "}"
    if isinstance(value, list):
        return "[" + ",".join(_json_text(v) for v in value) + "]"
    return json.dumps(value)


def _keys_of_line(line: bytes) -> frozenset[str]:
    try:
        value = json.loads(line)
    except ValueError as e:
        raise pa.ArrowInvalid(f"JSON parse error: {e}") from e
    if not isinstance(value, dict):
        raise pa.ArrowInvalid(
            f"JSON parse error: a line holds {type(value).__name__}, not an object"
        )
    return frozenset(value)


def _presence_masks(names: Sequence[str], shapes: list[frozenset[str]]) -> dict[str, pa.Array]:
    """For each column some rows do not name, a mask true where the row names it. Built per
    distinct set of names (few in practice), not per row and column."""
    distinct: dict[frozenset[str], int] = {}
    ids = pa.array([distinct.setdefault(shape, len(distinct)) for shape in shapes], pa.int32())
    masks: dict[str, pa.Array] = {}
    for name in names:
        naming = [i for shape, i in distinct.items() if name in shape]
        if len(naming) < len(distinct):
            masks[name] = pc.is_in(ids, pa.array(naming, pa.int32()))
    return masks


def _line_blocks(filesystem: pafs.FileSystem, path: str) -> Iterator[bytes]:
    with _open_stream(filesystem, path) as source:
        yield from _line_blocks_of(source)


def _line_blocks_of(source: pa.NativeFile) -> Iterator[bytes]:
    """A file's bytes in blocks of whole lines, each about ``TEXT_BLOCK_BYTES`` long (a
    longer line is a block of its own)."""
    pending = b""
    while chunk := bytes(source.read(TEXT_BLOCK_BYTES)):
        pending += chunk
        end = pending.rfind(b"\n") + 1
        if end:
            yield pending[:end]
            pending = pending[end:]
    if pending.strip():
        yield pending


# Arrow's JSON reader counts rows from 0 within a block of the file; these find the line.
_JSON_KIND_CHANGE = re.compile(r"Column\((/[^)]*)\) changed from \w+ to (\w+)")
_JSON_SYNTAX_ERROR = re.compile(r"JSON parse error: ")
_JSON_BAD_NUMBER = re.compile(
    r"Failed to convert JSON to (.+?)"
    r"(?:, couldn't parse:(.*)$|: (\S+) requires (?:scale|precision))",
    re.DOTALL,
)
_JSON_BAD_STRING = re.compile(r"The string '(.*)' is not a valid (\w+)", re.DOTALL)
_JSON_ROW_OF_BLOCK = re.compile(r"\.? in row \d+")


def _at_json_line(
    filesystem: pafs.FileSystem,
    path: str,
    table_types: Mapping[str, pa.DataType],
    items: Iterator[_Item],
) -> Iterator[_Item]:
    """``items`` read from a JSON-lines file; a failure of Arrow's reader names the line of the
    file it is on (counted from 1, blank lines included), as a CSV error names its row."""
    zeros_checked: set[str] = set()
    integers_checked: set[str] = set()
    try:
        for item in items:
            item = _json_integers(filesystem, path, table_types, item, integers_checked)
            _check_json_text(filesystem, path, table_types, item, zeros_checked)
            yield item
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
        message = str(e)
        try:
            nested = _json_nested_value(filesystem, path, message, table_types)
        except OSError:
            nested = None
        if nested is not None:
            raise nested from e
        if not isinstance(e, pa.ArrowInvalid):
            raise
        try:
            fraction = _json_fraction(filesystem, path, message, table_types)
        except OSError:
            fraction = None
        if fraction is not None:
            raise pa.ArrowInvalid(fraction) from e
        try:
            refusal = _json_number_refusal(filesystem, path, message, table_types)
            where = _json_error_line(filesystem, path, message, table_types)
        except OSError:
            refusal, where = None, None
        if refusal is not None:
            raise refusal from e
        try:
            time_number = _json_time_number(filesystem, path, message, table_types)
        except OSError:
            time_number = None
        if time_number is not None:
            raise time_number from e
        if where is None:
            raise
        raise pa.ArrowInvalid(f"{_JSON_ROW_OF_BLOCK.sub('', message)} ({where})") from e


# How Arrow's JSON reader fails on an object or array in a column of another kind: a first block
# read as one that does not cast to the column's type, or a change of kind in a later line.
_JSON_NESTED_CAST = re.compile(r"Unsupported cast from (?:struct|list|large_list)<")
_JSON_NESTED_CHANGE = re.compile(
    r"Column\((/[^)]*)\) changed from (?:\w+ to (?:object|array)|(?:object|array) to)"
)


def _json_nested_value(
    filesystem: pafs.FileSystem, path: str, message: str, table_types: Mapping[str, pa.DataType]
) -> TypeMismatchError | None:
    """The refusal of the first JSON object or array in a column of the table that takes
    neither (a number, boolean, date or timestamp column), naming the column, the value, its
    JSON kind and its line; None when Arrow's failure is about something else."""
    change = _JSON_NESTED_CHANGE.search(message)
    if change is not None:
        named = [change.group(1).lstrip("/")]
    elif _JSON_NESTED_CAST.search(message):
        named = list(table_types)
    else:
        return None
    columns = [
        name
        for name in named
        if name in table_types
        and not _is_varchar(table_types[name])
        and not pa.types.is_nested(table_types[name])
    ]

    def holds_nested(row: dict[str, Any]) -> bool:
        return any(isinstance(row.get(name), dict | list) for name in columns)

    where = _first_json_line(filesystem, path, holds_nested) if columns else None
    if where is None:
        return None
    line = where.split(": ", 1)[1]
    row = json.loads(line, parse_float=_JsonNumber, parse_int=_JsonNumber)
    name = next(name for name in columns if isinstance(row.get(name), dict | list))
    kind, target = _json_kind(row[name]), table_types[name]
    sql = arrow_to_sql_or_str(target)
    written = json.dumps(json.loads(line)[name], separators=(",", ":"), ensure_ascii=False)
    return TypeMismatchError(
        f"{path!r}: column {name!r} ({sql}): value {_shown(written.encode(), 60)} is a JSON "
        f"{kind}, and {an(sql)} column takes no {kind}: write one value of the column in its "
        f"place, or keep the {kind} in a VARCHAR column, which holds it as its JSON text "
        f"({where})"
    )


_JSON_TOO_BIG_FOR_DOUBLE = re.compile(r"Number too big to be stored in double")
_JSON_CONSTANT_REFUSED = re.compile(r"The string '-?(?:NaN|Infinity)' is not a valid decimal128")
# How the reader refuses a number beyond DECIMAL(38,0), the type integer columns are read as.
_JSON_NOT_DECIMAL = re.compile(r"The string '.*' cannot be represented as decimal128")
_JSON_INTEGER = re.compile(r"-?[0-9]+")
_JSON_CONVERSION_FAILURE = re.compile(r"Failed to convert JSON to ")


_JSON_INTEGER_FRACTION = re.compile(
    r"Failed to convert JSON to decimal128\(38, 0\): (\S+) requires scale"
)


def _json_fraction(
    filesystem: pafs.FileSystem, path: str, message: str, table_types: Mapping[str, pa.DataType]
) -> str | None:
    """The reader's refusal of a number with a fraction in an integer column (read as
    DECIMAL(38,0)) in the column's own terms, with its line; None for other errors."""
    match = _JSON_INTEGER_FRACTION.search(message)
    if match is None:
        return None
    integers = [c for c, t in table_types.items() if pa.types.is_integer(t)]
    found = _first_json_number(filesystem, path, integers, lambda text, _: text == match[1])
    if found is None:
        return None
    name, text, where = found
    return (
        f"column {name!r} ({arrow_to_sql_or_str(table_types[name])}): {text} is not a whole "
        f"number ({where})"
    )


def _json_number_refusal(
    filesystem: pafs.FileSystem, path: str, message: str, table_types: Mapping[str, pa.DataType]
) -> TypeMismatchError | None:
    """A JSON number that is well formed but does not fit its column, refused as the same value
    in a list of dicts is (:class:`TypeMismatchError` naming the column and value), with the
    file and line: an integer out of an integer column's range or with more whole digits than
    a DECIMAL holds, a number too large for a double. None for other errors."""
    number = _JSON_BAD_NUMBER.search(message)
    constant = _JSON_CONSTANT_REFUSED.search(message)
    if constant is not None:
        # NaN or an infinity (Python's json writes them) in an integer or DECIMAL column.
        exact = [
            c for c, t in table_types.items() if pa.types.is_integer(t) or pa.types.is_decimal(t)
        ]

        def holds_constant(row: dict[str, Any]) -> bool:
            return any(isinstance(row.get(c), _JsonConstant) for c in exact)

        where = _first_json_line(filesystem, path, holds_constant)
        if where is None:
            return None
        row = json.loads(where.split(": ", 1)[1], parse_constant=_JsonConstant)
        name = next(c for c in exact if isinstance(row.get(c), _JsonConstant))
        sql = arrow_to_sql_or_str(table_types[name])
        return TypeMismatchError(
            f"{path!r}: column {name!r} ({sql}): value {row[name]} is no number {an(sql)} holds "
            f"(no NaN or infinity); write null for a missing value ({where})"
        )
    if _JSON_TOO_BIG_FOR_DOUBLE.search(message):
        # A VARCHAR column takes such a number as its text; any other column's is refused.
        numeric = [c for c, t in table_types.items() if not _is_varchar(t)]
        found = _first_json_number(filesystem, path, numeric, _beyond_double)
        if found is None:
            return None
        name, text, where = found
        return _json_number_unfit(path, name, table_types.get(name, pa.float64()), text, where)
    if (
        number is None
        and _JSON_CONVERSION_FAILURE.search(message) is None
        and _JSON_NOT_DECIMAL.search(message) is None
    ):
        return None
    found = _first_json_number(
        filesystem,
        path,
        [c for c, t in table_types.items() if pa.types.is_integer(t) or pa.types.is_decimal(t)],
        lambda text, name: (
            _integer_unfit(text, table_types[name])
            or _decimal_places_unfit(text, table_types[name])
            or _decimal_whole_digits_unfit(text, table_types[name])
        ),
    )
    if found is None:
        return None
    name, text, where = found
    kind = table_types[name]
    sql = arrow_to_sql_or_str(kind)
    if _decimal_places_unfit(text, kind):
        return TypeMismatchError(
            f"{path!r}: column {name!r} ({sql}): value {text} has more than {kind.scale} "
            f"decimal place(s); round it in the file ({where})"
        )
    if pa.types.is_integer(kind):
        return _json_out_of_range(path, name, kind, text, where)
    return TypeMismatchError(
        f"{path!r}: column {name!r} ({sql}): value {text} does not fit: it has more than "
        f"{kind.precision - kind.scale} whole digit(s); widen the column ({where})"
    )


def _json_number_unfit(
    path: str, name: str, kind: pa.DataType, text: str, where: str
) -> TypeMismatchError:
    """The refusal of JSON number ``text`` for column ``name`` of type ``kind`` in the words of
    that type: an integer's or a DECIMAL's range, a float's magnitudes, a BOOLEAN, DATE or
    timestamp column taking no number."""
    sql = arrow_to_sql_or_str(kind)
    if pa.types.is_integer(kind):
        return _json_out_of_range(path, name, kind, text, where)
    if pa.types.is_boolean(kind):
        return _json_number_not_boolean(path, name, text, where)
    if pa.types.is_date(kind) or pa.types.is_timestamp(kind):
        return _json_not_time_text(path, name, kind, text, "number", where)
    if pa.types.is_decimal(kind):
        whole = int(kind.precision) - int(kind.scale)
        return TypeMismatchError(
            f"{path!r}: column {name!r} ({sql}): value {text} is out of its range ({an(sql)} holds "
            f"numbers of up to {whole} whole digit(s) and {kind.scale} decimal place(s)); fix "
            f"the value or widen the column ({where})"
        )
    return TypeMismatchError(f"{path!r}: {float_overflow_message(name, kind, text)} ({where})")


def _decimal_places_unfit(text: str, kind: pa.DataType) -> bool:
    """Whether JSON number ``text`` has more decimal places than DECIMAL type ``kind`` keeps."""
    if not pa.types.is_decimal(kind) or DECIMAL_NUMBER_TEXT.fullmatch(text) is None:
        return False
    why = decimal_text_refusal(text, kind)
    return why is not None and "decimal place" in why


def _decimal_whole_digits_unfit(text: str, kind: pa.DataType) -> bool:
    """Whether JSON number ``text`` (``1e20``, ``123456789012.5``) has more whole digits than
    DECIMAL type ``kind`` holds."""
    if not pa.types.is_decimal(kind) or DECIMAL_NUMBER_TEXT.fullmatch(text) is None:
        return False
    why = decimal_text_refusal(text, kind)
    return why is not None and "whole digit" in why


def _json_time_number(
    filesystem: pafs.FileSystem, path: str, message: str, table_types: Mapping[str, pa.DataType]
) -> TypeMismatchError | None:
    """A JSON number or boolean where a DATE or timestamp column is read from text (Arrow says
    the column "changed from string to number"), refused naming the column, value and line."""
    change = _JSON_KIND_CHANGE.search(message)
    if change is None:
        return None
    name = change.group(1).lstrip("/")
    target = table_types.get(name)
    if target is None or not (pa.types.is_timestamp(target) or pa.types.is_date(target)):
        return None
    found = _first_json_value(
        filesystem, path, name, lambda value: isinstance(value, _JsonNumber | bool)
    )
    if found is None:
        return None
    value, where = found
    return _json_not_time_text(path, name, target, _json_text(value), _json_kind(value), where)


def _json_not_time_text(
    path: str, name: str, target: pa.DataType, text: str, kind: str, where: str
) -> TypeMismatchError:
    """The refusal of a JSON ``kind`` (number or boolean) written ``text`` in DATE or timestamp
    column ``name``, which is read from text only."""
    sql = arrow_to_sql_or_str(target)
    what = "date" if pa.types.is_date(target) else "timestamp"
    example = {"DATE": "2026-01-03", "TIMESTAMP": "2026-01-03T10:00:00"}.get(
        sql, "2026-01-03T10:00:00Z"
    )
    return TypeMismatchError(
        f"{path!r}: column {name!r} ({sql}): value {text} is a JSON {kind}, and {an(sql)} column "
        f"is read from {what} text, as {example!r} (a number such as seconds since the epoch "
        f"is not taken for one): write the {what} as text in the file, or pass the rows as "
        f"dicts holding datetimes ({where})"
    )


def _first_json_value(
    filesystem: pafs.FileSystem, path: str, name: str, is_wanted: Callable[[Any], bool]
) -> tuple[Any, str] | None:
    """(value, ``line N: ...``) of the first value of column ``name`` that ``is_wanted`` picks
    (numbers read as :class:`_JsonNumber`, the text they are written as)."""
    found: list[Any] = []

    def holds_wanted(row: dict[str, Any]) -> bool:
        value = row.get(name)
        if value is not None and is_wanted(value):
            found.append(value)
            return True
        return False

    where = _first_json_line(filesystem, path, holds_wanted)
    if where is None or not found:
        return None
    return found[0], where


def _integer_unfit(text: str, kind: pa.DataType) -> bool:
    """Whether ``text`` is a JSON integer outside integer type ``kind``'s range, or with more
    whole digits than DECIMAL type ``kind`` holds."""
    if pa.types.is_integer(kind):
        if DECIMAL_NUMBER_TEXT.fullmatch(text) is None:
            return False
        number = decimal.Decimal(text)
        low, high = _integer_range(kind)
        return number == number.to_integral_value() and not low <= number <= high
    if _JSON_INTEGER.fullmatch(text) is None:
        return False
    return len(text.lstrip("-")) > int(kind.precision) - int(kind.scale)


def _refuse_changed_json_floats(
    filesystem: pafs.FileSystem,
    path: str,
    name: str,
    target: pa.DataType,
    column: Any,
    zeros_checked: set[str],
) -> None:
    """Refuse a number Arrow's JSON reader changed on its way into a float column: one too
    large for a double (``2e308``, taken as infinity; JSON has no infinity, so any infinity read
    is one) or an integer beyond those the column holds exactly (9007199254740993 rounded to a
    double; a dict's is refused), or one too small for a double (``1e-400``, taken as 0; a FLOAT
    column's numbers are doubles here, checked against the FLOAT when converted). Only a batch
    holding such a magnitude reads its file again; for zeros, only the first such batch
    (``zeros_checked``, updated here, names the columns whose whole file was looked at)."""
    large = pc.greater_equal(pc.abs(column), float(FLOAT_EXACT_INTEGERS[target]))
    zeros = name not in zeros_checked and pc.any(pc.equal(column, 0)).as_py()
    if not (zeros or pc.any(pc.fill_null(large, False)).as_py()):
        return
    if zeros:
        zeros_checked.add(name)

    def is_refused(text: str, _: str) -> bool:
        return (
            _beyond_double(text, name)
            or inexact_integer(text, target)
            or _underflows(text, pa.float64())
        )

    found = _first_json_number(filesystem, path, [name], is_refused)
    if found is not None:
        _, text, where = found
        if _beyond_double(text, name):
            message = float_overflow_message(name, target, text)
        elif inexact_integer(text, target):
            message = inexact_integer_message(name, target, text)
        else:
            message = float_underflow_message(name, target, text)
        raise TypeMismatchError(f"{path!r}: {message} ({where})")


def _beyond_double(text: str, name: str) -> bool:
    return float(text) in (float("inf"), float("-inf"))


def _first_json_number(
    filesystem: pafs.FileSystem,
    path: str,
    columns: Iterable[str],
    is_refused: Callable[[str, str], bool],
) -> tuple[str, str, str] | None:
    """(column, number as written, ``line N: ...``) of the first number of ``columns`` that
    ``is_refused`` (given its text and column) picks."""
    names = list(columns)
    found: list[tuple[str, str]] = []

    def holds_refused(row: dict[str, Any]) -> bool:
        for name in names:
            value = row.get(name)
            if isinstance(value, _JsonNumber) and is_refused(str(value), name):
                found.append((name, str(value)))
                return True
        return False

    where = _first_json_line(filesystem, path, holds_refused)
    if where is None or not found:
        return None
    return found[0][0], found[0][1], where


def _check_json_text(
    filesystem: pafs.FileSystem,
    path: str,
    table_types: Mapping[str, pa.DataType],
    item: Any,
    zeros_checked: set[str],
) -> None:
    """Text a JSON-lines file gives for a number, boolean, date or timestamp column, parsed
    here so a refused value names the file and its line (it is parsed again when written)."""
    table = item.table if isinstance(item, Rows) else item
    for name in table.column_names:
        target = table_types.get(name)
        column = table.column(name)
        if target is not None and pa.types.is_floating(column.type):
            _refuse_changed_json_floats(filesystem, path, name, target, column, zeros_checked)
        if target is None or not pa.types.is_string(column.type) or pa.types.is_string(target):
            continue
        _parsed_json_text(filesystem, path, name, pa.chunked_array([column]), target)


def _json_error_line(
    filesystem: pafs.FileSystem, path: str, message: str, table_types: Mapping[str, pa.DataType]
) -> str | None:
    """The line of the file an error of Arrow's JSON reader is about, found by reading the
    file again line by line; None when the message names nothing to look for."""
    change = _JSON_KIND_CHANGE.search(message)
    number = _JSON_BAD_NUMBER.search(message)
    string = _JSON_BAD_STRING.search(message)
    if change is not None:
        column, kind = change.group(1).lstrip("/"), change.group(2)
        return _first_json_line(
            filesystem, path, lambda row: column in row and _json_kind(row[column]) == kind
        )
    if number is not None or string is not None:
        if number is not None:
            type_name, value = number.group(1), number.group(2) or number.group(3)
        else:
            assert string is not None
            value, type_name = string.group(1), string.group(2)
        wanted_kind = "number" if number is not None else "string"
        columns = {c for c, t in table_types.items() if str(t).startswith(type_name.strip())}

        def holds_value(row: dict[str, Any]) -> bool:
            return any(
                c in row and _json_kind(row[c]) == wanted_kind and row[c].strip() == value.strip()
                for c in columns
            )

        return _first_json_line(filesystem, path, holds_value)
    if _JSON_SYNTAX_ERROR.search(message):
        return _first_json_line(filesystem, path, lambda row: False)
    return None


def _first_json_line(
    filesystem: pafs.FileSystem, path: str, is_wanted: Callable[[dict[str, Any]], bool]
) -> str | None:
    """``line N: <the line>`` of the first line that is no JSON object or whose object
    ``is_wanted`` picks. Numbers are read as the text they are written as."""
    with _open_stream(filesystem, path) as source:
        number = 0
        for block in _line_blocks_of(source):
            for line in block.splitlines():
                number += 1
                if not line.strip():
                    continue
                try:
                    row = json.loads(
                        line,
                        parse_float=_JsonNumber,
                        parse_int=_JsonNumber,
                        parse_constant=_JsonConstant,
                    )
                except ValueError:
                    return f"line {number}: {_shown(line)}"
                if not isinstance(row, dict):
                    return f"line {number}: {_shown(line)}"
                if is_wanted(row):
                    return f"line {number}: {_shown(line)}"
    return None


def _shown(line: bytes, limit: int = 200) -> str:
    text = line.decode("utf-8", "replace").strip()
    return text if len(text) <= limit else text[:limit] + "..."


def _json_kind(value: Any) -> str:
    """The name Arrow's JSON reader gives a value's kind."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, dict):
        return "object"
    if isinstance(value, list):
        return "array"
    if value is None:
        return "null"
    return "number" if isinstance(value, _JsonNumber | _JsonConstant) else "string"


class _JsonNumber(str):
    """A JSON number as the text it is written as (``1.50`` stays ``1.50``)."""


class _JsonConstant(str):
    """``NaN``, ``Infinity`` or ``-Infinity``, which JSON does not have and Python's ``json``
    writes: a number to Arrow's reader, never the text of a number found too large."""


def _starts_with_array(filesystem: pafs.FileSystem, path: str) -> bool:
    """Whether the file's first character other than white space (and a UTF-8 byte order
    mark) is ``[``."""
    with _open_stream(filesystem, path) as source:
        head = source.read(4096)
    return bytes(head).removeprefix(b"\xef\xbb\xbf").lstrip()[:1] == b"["


def _is_json_text(inferred: pa.DataType) -> bool:
    """JSON has no dates or timestamps: the reader infers them from text."""
    return bool(
        pa.types.is_string(inferred)
        or pa.types.is_date(inferred)
        or pa.types.is_timestamp(inferred)
    )


_FILE_READERS = {"parquet": _parquet_batches, "csv": _csv_batches, "json": _json_batches}


def empty_key_field(
    data: Any, key_columns: Sequence[str], store: Store | None = None
) -> str | None:
    """Where a CSV source ``data`` (a path, folder or glob) leaves a key column empty: the
    file, column and row (counted from 1 after the header) of the first such field, for a
    :class:`MissingKeyError` to name; None for any other source, or when no CSV field is empty
    (the NULL key came another way). Read only once a key was found NULL: the fast path reads
    nothing twice."""
    if not isinstance(data, str | os.PathLike):
        return None
    location = os.fspath(data)
    try:
        filesystem, paths, file_format = _resolve_files(location, store)
        if file_format != "csv":
            return None
        for path in paths:
            with _open_stream(filesystem, path) as source:
                header = set(_open_csv_text(source, []).schema.names)
            for key in key_columns:
                if key not in header:
                    continue
                found = _first_csv_text(filesystem, path, key, _first_null, empty_is_null=True)
                if found is not None:
                    return (
                        f"{path!r}: primary-key column {key!r}, row {found[0]}: the field is empty"
                    )
    except (LedgerError, OSError, pa.ArrowException):
        return None  # the file changed or went away meanwhile: the message stays as it was
    return None


def _first_null(texts: pa.Array) -> int | None:
    if not texts.null_count:
        return None
    return int(pc.index(pc.is_null(texts), True).as_py())


def _resolve_files(location: str, store: Store | None) -> tuple[pafs.FileSystem, list[str], str]:
    """The filesystem, the non-empty data files and their one format for a path, folder or
    glob."""
    if not location.strip():
        # Read as a path it would be the working folder: a variable left unset
        # (``os.environ.get("SRC", "")``) would load or delete whatever lies there.
        raise InvalidArgumentError(
            f"data {location!r} is an empty path, which names no file or folder; give the path "
            "or URI of the data (a file, a folder or a glob); nothing was read or written"
        )
    filesystem, path = _filesystem_of(location, store)
    # A file or folder that exists under a name holding glob characters (``d[1]``) is itself.
    if _GLOB_CHARACTERS & set(path) and not _exists(filesystem, path, location):
        infos = _glob(filesystem, path)
        if not infos:
            raise SourceNotFoundError(f"no file matches {location!r}; check the pattern")
        listed = True
    else:
        info = _file_info(filesystem, path, location)
        if info.type == pafs.FileType.NotFound:
            raise SourceNotFoundError(
                f"no file or folder at {location!r} (a str or path given as data is read as a "
                "path or URI to Parquet, CSV or JSON-lines files)"
            )
        if info.type not in (pafs.FileType.File, pafs.FileType.Directory):
            raise InvalidArgumentError(
                f"{location!r} is neither a file nor a folder of data files (a device, pipe or "
                "socket, such as /dev/stdin): data is read from Parquet, CSV or JSON-lines "
                "files, a folder or a glob of them; write the rows to a file first, or read them "
                "and pass the rows"
            )
        listed = info.type != pafs.FileType.File  # a folder's files, not one given by name
        infos = [info] if not listed else _folder_files(filesystem, path)
        if not infos:
            # A folder that exists and holds no data file (empty, or only a _SUCCESS marker or
            # hidden files: a job that wrote no rows) is empty data, as a zero-byte file is.
            return filesystem, [], _EMPTY_FOLDER_FORMAT
    formats = {_format_of(info.path, location, listed) for info in infos}
    if len(formats) > 1:
        raise InvalidArgumentError(
            f"{location!r} mixes file formats {sorted(formats)}; read one format at a time"
        )
    # A zero-byte file holds no rows (and no CSV header to parse): it is empty data.
    paths = sorted(info.path for info in infos if info.size)
    return filesystem, paths, formats.pop()


_EMPTY_FOLDER_FORMAT = "parquet"  # any format: no file is read


def _resolve_source_files(
    files: SourceFiles, store: Store | None
) -> tuple[pafs.FileSystem, list[str], str]:
    """As :func:`_resolve_files`, keeping only ``files.paths`` when it names any."""
    filesystem, paths, file_format = _resolve_files(files.location, store)
    if files.paths:
        wanted = set(files.paths)
        paths = [path for path in paths if path in wanted]
    return filesystem, paths, file_format


def local_source_files(location: str) -> list[str]:
    """The local data files a read of ``location`` (a file, folder or glob) takes, as absolute
    paths in reading order: the files named, less hidden and ``_`` names and empty files.
    Empty for an ``s3://`` URI or a location that names no
    data file (its read fails with the reason)."""
    if urlparse(location).scheme == "s3":
        return []
    try:
        _, paths, _ = _resolve_files(location, None)
    except LedgerError:
        return []
    return paths


def _filesystem_of(location: str, store: Store | None) -> tuple[pafs.FileSystem, str]:
    parsed = urlparse(location)
    if parsed.scheme == "s3":
        if not parsed.netloc:
            raise InvalidArgumentError(f"S3 URI {location!r} has no bucket; use s3://bucket/key")
        return _s3_filesystem(store), f"{parsed.netloc}/{parsed.path.lstrip('/')}".rstrip("/")
    if parsed.scheme == "file":
        return pafs.LocalFileSystem(), parsed.path
    if parsed.scheme and len(parsed.scheme) > 1:  # "C:" is a Windows drive, not a scheme
        raise InvalidArgumentError(
            f"unsupported URI scheme {parsed.scheme!r} in {location!r}; use a local path, "
            "file:// or s3://"
        )
    return pafs.LocalFileSystem(), str(Path(location).expanduser().absolute())


def _s3_filesystem(store: Store | None) -> pafs.FileSystem:
    """The connection ``s3://`` sources are read through: the settings given for sources
    (``connect(..., source_options=...)``), else the table's own when it lives on S3, else the
    environment's (``AWS_ENDPOINT_URL_S3``, ``AWS_ENDPOINT_URL``, the standard AWS chain)."""
    if store is not None and store.source_settings is not None:
        return _source_filesystem(store.source_settings)
    if store is not None:
        filesystem = store.filesystem
        if isinstance(filesystem, pafs.S3FileSystem):
            return filesystem
    return _source_filesystem(s3_settings())


@functools.lru_cache(maxsize=8)
def _source_filesystem(settings: S3Settings) -> pafs.FileSystem:
    filesystem: pafs.FileSystem = settings.filesystem()
    return filesystem


def _exists(filesystem: pafs.FileSystem, path: str, location: str) -> bool:
    return bool(_file_info(filesystem, path, location).type != pafs.FileType.NotFound)


def _file_info(filesystem: pafs.FileSystem, path: str, location: str) -> pafs.FileInfo:
    try:
        info: pafs.FileInfo = filesystem.get_file_info(path)
    except OSError as e:
        raise StorageError(f"cannot look up {location!r}: {e}") from e
    return info


def _folder_files(filesystem: pafs.FileSystem, folder: str) -> list[pafs.FileInfo]:
    """The files under a folder, recursively; hidden and ``_``-prefixed names (markers such as
    ``_SUCCESS``) are skipped. Every other file is data: one of no data format is refused when
    its format is read (:func:`_format_of`), as a glob naming it refuses it."""
    selector = pafs.FileSelector(folder, recursive=True)

    def taken(path: str) -> bool:
        return not _is_hidden(path[len(folder) :])

    _refuse_broken_links(filesystem, folder, taken, folder)
    return _listed_files(filesystem.get_file_info(selector), taken, folder)


def _listed_files(
    listed: Sequence[pafs.FileInfo], taken: Callable[[str], bool], location: str
) -> list[pafs.FileInfo]:
    """The files of a listing a read of ``location`` takes; a device, pipe or socket among them
    is refused naming it, as it is given alone: leaving it out would load the other files
    without its rows."""
    files = []
    for info in listed:
        if info.type in (pafs.FileType.Directory, pafs.FileType.NotFound) or not taken(info.path):
            continue
        if info.type != pafs.FileType.File:
            raise InvalidArgumentError(
                f"{info.path!r}, which {location!r} names, is neither a file nor a folder (a "
                "device, pipe or socket): data is read from Parquet, CSV or JSON-lines files; "
                "move it out of the folder or leave it out of the glob (nothing was read or "
                "written)"
            )
        files.append(info)
    return files


def _glob(filesystem: pafs.FileSystem, pattern: str) -> list[pafs.FileInfo]:
    """The files a glob names, as a shell reads it: ``*``, ``?`` and ``[...]`` match within one
    folder level and ``**`` any number of levels; a folder the glob names is read whole, like a
    folder given by name. Listed from the deepest folder without glob characters."""
    first = min(pattern.index(c) for c in _GLOB_CHARACTERS if c in pattern)
    base = pattern[:first].rsplit("/", 1)[0] if "/" in pattern[:first] else "."
    try:
        listed = filesystem.get_file_info(pafs.FileSelector(base, recursive=True))
    except FileNotFoundError:
        return []
    except OSError as e:
        raise StorageError(f"cannot list {base!r}: {e}") from e
    wanted = [part for part in pattern.split("/") if part not in ("", ".")]

    def taken(path: str) -> bool:
        parts = [part for part in path.split("/") if part not in ("", ".")]
        return _glob_names(wanted, parts) and not _is_hidden(path[len(base) :])

    _refuse_broken_links(filesystem, base, taken, pattern)
    return _listed_files(listed, taken, pattern)


def _refuse_broken_links(
    filesystem: pafs.FileSystem, base: str, taken: Callable[[str], bool], location: str
) -> None:
    """Raise :class:`SourceNotFoundError` naming a link under ``base`` whose target does not
    exist where a read of ``location`` would take a file of its name: a listing leaves such a
    link out, and the load would silently miss its rows. Only local disks hold links."""
    if not isinstance(filesystem, pafs.LocalFileSystem):
        return
    for root, folders, files in os.walk(base, followlinks=True):
        for name in (*files, *folders):
            path = os.path.join(root, name)
            if os.path.islink(path) and not os.path.exists(path) and taken(path):
                raise SourceNotFoundError(
                    f"{path!r}, which {location!r} names, is a link to "
                    f"{os.readlink(path)!r}, which does not exist; restore its target or remove "
                    "the link (nothing was read or written)"
                )


def _glob_names(pattern: list[str], path: list[str]) -> bool:
    """Whether the glob's levels name ``path`` or one of the folders above it."""
    if not pattern:
        return True  # the glob named a folder above this file (or the file itself)
    head, rest = pattern[0], pattern[1:]
    if head == "**":
        return any(_glob_names(rest, path[i:]) for i in range(len(path) + 1))
    return bool(path) and fnmatch.fnmatchcase(path[0], head) and _glob_names(rest, path[1:])


def _is_hidden(relative: str) -> bool:
    return any(part.startswith((".", "_")) for part in relative.split("/") if part)


# The codec of a compressed file, by its extension in any case (pyarrow's own detection knows
# only the lower-case spelling, and would read ``.CSV.GZ`` as text).
_CODECS = {".gz": "gzip", ".bz2": "bz2", ".zst": "zstd"}


def _open_stream(filesystem: pafs.FileSystem, path: str) -> pa.NativeFile:
    compression = _CODECS.get(Path(path).suffix.lower())
    return filesystem.open_input_stream(path, compression=compression)


def _suffix_of(path: str) -> str:
    """The extension naming a file's format: the last two (``.csv.gz``) where they name one,
    else the last."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    double = "".join(suffixes[-2:])
    return double if double in FILE_FORMATS else (suffixes[-1] if suffixes else "")


def _format_of(path: str, location: str, listed: bool) -> str:
    """The format a file's name tells; a file that tells none is refused, whether given alone
    or named by a folder or glob (``listed``): skipping it would leave a misnamed data file
    (``part-0000``, ``rows.tsv``) out of the load without a word."""
    suffix = _suffix_of(path)
    if suffix not in FILE_FORMATS:
        raise InvalidArgumentError(
            f"cannot tell the format of {path!r} (from {location!r}); name files "
            f"{', '.join(FILE_FORMATS)}"
            if not listed
            else f"{path!r}, which {location!r} names, is no data file: cannot tell its format "
            f"from its name (data files are named {', '.join(FILE_FORMATS)}); move it out of the "
            "folder, name it with a leading '_' or '.' to have it skipped, or leave it out of "
            "the glob (nothing was read or written)"
        )
    return FILE_FORMATS[suffix]


__all__ = ["ACCEPTED_SOURCES", "Rows", "concat_rows", "local_source_files", "read_rows"]
