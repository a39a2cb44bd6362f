"""Data files as a DuckDB relation of raw entries.

Local files are scanned by DuckDB's own Parquet reader; files on S3 through a pyarrow dataset
(DuckDB never loads its httpfs extension: there may be no network to download it).
"""

from __future__ import annotations

import functools
import os
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads
import pyarrow.fs as pafs
import pyarrow.parquet as pq
from sqlglot import exp

from ledger.engines.duckdb.session import bind_relations
from ledger.errors import SnapshotNotFoundError
from ledger.log.entries import FileMarker
from ledger.schema import arrow_to_sql
from ledger.sql import ident
from ledger.sql.trees import col as ident_column
from ledger.storage import Store


def scan_files(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    table_prefix: str,
    files: Sequence[FileMarker],
    schema: pa.Schema,
) -> duckdb.DuckDBPyRelation:
    """The raw entries of ``files`` as a relation with exactly ``schema``.

    Files written before a schema change lack new columns (read as NULL) or hold narrower types
    (cast up), so every column is projected to the table's current type.
    """
    if not files:
        return con.from_arrow(schema.empty_table())
    keys = [table_prefix + f.path for f in files]
    local = [store.local_path(k) for k in keys]
    if all(p is not None for p in local) and not misread_by_duckdb(
        [p for p in local if p is not None]
    ):
        # No hive partitioning: partition values live in the log, never as file columns.
        relation = con.read_parquet(
            [p for p in local if p is not None], union_by_name=True, hive_partitioning=False
        )
        return relation.project(_projection(schema, frozenset(relation.columns)))
    paths = [store.fs_path(k) for k in keys]
    filesystem = store.filesystem
    if isinstance(filesystem, pafs.PyFileSystem):
        return con.from_arrow(_opened_dataset(filesystem, paths, schema))
    dataset = pads.dataset(paths, schema=schema, format="parquet", filesystem=filesystem)
    return con.from_arrow(dataset)


def _opened_dataset(
    filesystem: pafs.FileSystem, paths: Sequence[str], schema: pa.Schema
) -> pads.Dataset:
    """The Parquet files ``paths`` as a dataset of files opened here, on the calling thread.

    DuckDB starts each scan of a dataset (``Scanner.to_reader``) holding the GIL, and pyarrow
    then opens the dataset's files on its own threads while pulling from them; a filesystem
    written in Python needs the GIL for every open, so a thread opening a file and the scan
    being started wait on each other for good. Files opened beforehand are only read by
    pyarrow's threads, through the file objects the filesystem returned (native ones, as a
    filesystem wrapping a native one returns, never call back into Python). Native filesystems
    (S3, local disk) are scanned by path, each file opened as the scan reaches it.
    """
    parquet = pads.ParquetFileFormat()
    fragments = [parquet.make_fragment(filesystem.open_input_file(p)) for p in paths]
    return pads.FileSystemDataset(fragments, schema, parquet)


@functools.lru_cache(maxsize=256)
def _projection(schema: pa.Schema, present: frozenset[str]) -> str:
    """Every column of ``schema`` in its type, NULL where the files lack it: rendered once per
    schema and set of columns found (views on small tables are called again and again)."""
    return ", ".join(
        (
            f"CAST({ident(f.name)} AS {arrow_to_sql(f.type)}) AS {ident(f.name)}"
            if f.name in present
            else f"CAST(NULL AS {arrow_to_sql(f.type)}) AS {ident(f.name)}"
        )
        for f in schema
    )


# --- data files named inside the query text ------------------------------------------------------
#
# Each relation operation of the DuckDB client (reading files, projecting, registering a view,
# running SQL over views) binds its whole statement again, and every bind over Parquet files
# reads their footers: a view call built from relation operations paid about 1 ms per operation
# before its query ran. The files are therefore named inside the one statement a view runs:
# a common table expression per group of files, reading the files given as a parameter, so the
# statement's text depends only on the query's shape and the columns the files hold, and is
# rendered once per shape.


@dataclass(frozen=True)
class ParquetSource:
    """Data files read by name inside a statement: the common table expression ``name`` is
    every column of ``schema`` in its current type (NULL where no file holds it), reading the
    files listed by the statement's parameter ``name``; no file at all reads no row."""

    name: str
    schema: pa.Schema
    present: frozenset[str]  # the columns of ``schema`` some file holds
    empty: bool = False
    # Read once into memory where the statement names it several times (small tables only:
    # each reader then scans the rows kept, instead of opening and decoding the files again).
    materialized: bool = False
    # The files' columns already have the types of ``schema``: read as they are, no cast.
    typed: bool = False
    # Read with ``union_by_name`` (every file's footer read when the statement is bound, which
    # gives DuckDB every file's statistics: an integer grouping column then takes its perfect
    # hash grouping). Typed files may leave it out: DuckDB matches their columns by name.
    union_by_name: bool = True

    def tree(self) -> exp.Select:
        columns = [_column(f, f.name in self.present, cast=not self.typed) for f in self.schema]
        if self.empty:
            return exp.select(*columns).where(exp.false())
        options = [_option("union_by_name", exp.true())] if self.union_by_name else []
        read = exp.ReadParquet(
            expressions=[
                exp.Placeholder(this=self.name),
                *options,
                # Partition values live in the log, never as file columns.
                _option("hive_partitioning", exp.false()),
            ]
        )
        return exp.select(*columns).from_(exp.Table(this=read))


@dataclass(frozen=True)
class FileSources:
    """The relations a statement reads, by role: ``names`` are what the statement calls them,
    ``parquet`` the files it names itself (see :func:`with_parquet_sources`), ``params`` the
    parameter values the statement runs with (each file list)."""

    names: dict[str, str]
    parquet: tuple[ParquetSource, ...]
    params: dict[str, list[str]]


def file_sources(
    con: duckdb.DuckDBPyConnection,
    store: Store,
    table_prefix: str,
    files: dict[str, Sequence[FileMarker]],
    schema: pa.Schema,
) -> FileSources:
    """The files of each role (``{"entries": [...], ...}``) as relations of raw entries with
    exactly ``schema``, ready to be named in one statement on ``con``.

    Files on a local disk are read by the statement itself (a common table expression over
    ``read_parquet`` of a parameter); files elsewhere are scanned through pyarrow and bound
    as views (:func:`scan_files`)."""
    keys = {role: [table_prefix + f.path for f in found] for role, found in files.items()}
    local = {role: [store.local_path(k) for k in found] for role, found in keys.items()}
    if not all(p is not None for paths in local.values() for p in paths) or misread_by_duckdb(
        [p for paths in local.values() for p in paths if p is not None]
    ):
        relations = {
            role: scan_files(con, store, table_prefix, found, schema)
            for role, found in files.items()
        }
        return FileSources(bind_relations(con, relations), (), {})
    parquet = []
    params: dict[str, list[str]] = {}
    names = {}
    for role, paths in local.items():
        name = f"__ledger_{role}_files"
        footers = [file_footer(p) for p in paths if p is not None]
        present = frozenset().union(*(footer.columns for footer in footers))
        parquet.append(
            ParquetSource(
                name,
                schema,
                present & frozenset(schema.names),
                not paths,
                typed=bool(footers) and all(_typed(footer, schema) for footer in footers),
            )
        )
        if paths:
            params[name] = [p for p in paths if p is not None]
        names[role] = name
    return FileSources(names, tuple(parquet), params)


def with_parquet_sources(query: exp.Query, sources: Sequence[ParquetSource]) -> exp.Query:
    """``query`` with a common table expression for each of ``sources``, inlined where read
    (each reader keeps its own projection and filters) unless the source asks to be
    materialized."""
    if not sources:
        return query
    out = exp.select("*").from_(exp.paren(query, copy=False))
    for source in sources:
        out = out.with_(
            exp.to_identifier(source.name, quoted=True),
            as_=source.tree(),
            materialized=source.materialized,
        )
    return out


def with_parquet_sources_inlined(query: exp.Query, sources: Sequence[ParquetSource]) -> exp.Query:
    """``query`` reading each of ``sources`` it names exactly once as a subquery in place (the
    others as :func:`with_parquet_sources` reads them). A statement with no common table
    expression is planned faster: DuckDB's inlining of a CTE read once, and the outer
    ``SELECT *``, each cost a bind that every call pays twice."""
    named: dict[str, list[exp.Table]] = {}
    for table in query.find_all(exp.Table):
        if isinstance(table.this, exp.Identifier) and not table.args.get("db"):
            named.setdefault(table.name, []).append(table)
    kept = []
    for source in sources:
        readers = named.get(source.name, [])
        if source.materialized or len(readers) != 1:
            kept.append(source)
            continue
        [reader] = readers
        name = exp.to_identifier(source.name, quoted=True)
        reader.replace(exp.Subquery(this=source.tree(), alias=exp.TableAlias(this=name)))
    return with_parquet_sources(query, kept)


@dataclass(frozen=True)
class ColumnFacts:
    """What the footers of a group of files prove about their columns, for every file."""

    null_free: frozenset[str]  # every file holds the column and no row of it is NULL
    negatable: frozenset[str]  # signed integers, no value the type's smallest (see FileFooter)


def column_facts(paths: Sequence[str]) -> ColumnFacts:
    """The :class:`ColumnFacts` of the local Parquet files ``paths`` (each footer read once per
    process: :func:`file_footer`); of no file at all, nothing is claimed."""
    footers = [file_footer(path) for path in paths]
    if not footers:
        return ColumnFacts(frozenset(), frozenset())
    return ColumnFacts(
        frozenset.intersection(*(footer.null_free for footer in footers)),
        frozenset.intersection(*(footer.negatable for footer in footers)),
    )


def file_columns(paths: Sequence[str]) -> frozenset[str]:
    """The column names any of the Parquet files ``paths`` holds (each footer read once per
    process: :func:`file_footer`)."""
    found: set[str] = set()
    for path in paths:
        found |= file_footer(path).columns
    return frozenset(found)


def _typed(footer: FileFooter, schema: pa.Schema) -> bool:
    """Whether a file holds every column of ``schema`` in exactly its type (files written
    before a column was added or widened do not)."""
    held = footer.schema
    for field in schema:
        index = held.get_field_index(field.name)
        if index < 0 or held.field(index).type != field.type:
            return False
    return True


def _column(field: pa.Field, present: bool, *, cast: bool = True) -> exp.Expr:
    name = exp.to_identifier(field.name, quoted=True)
    if present and not cast:
        return ident_column(field.name)
    kind = exp.DataType.build(arrow_to_sql(field.type), dialect="duckdb")
    value: exp.Expr = ident_column(field.name) if present else exp.Null()
    return exp.alias_(exp.cast(value, kind), name)


def _option(name: str, value: exp.Expr) -> exp.Expr:
    return exp.EQ(this=exp.column(name), expression=value)


# --- what a data file's footer says, read once per file ------------------------------------------
#
# DuckDB 2.0.0 answers `IS NULL` (and `coalesce`, `IS [NOT] DISTINCT FROM`) wrongly on a
# BYTE_ARRAY column chunk stored without a dictionary and without a page index, whose non-NULL
# values are all equal and which holds NULLs: it returns the non-NULL rows too, as NULL. Writers
# now always write the page index (docs/format.md 7); files written before carry the trigger
# and are read through pyarrow, which reads them right.
#
# Both that and the column names a file holds come from its footer, read once per process for
# each (path, size, modification time): data files are never rewritten (every file name is
# new), and the size and time make a file replaced by hand read again all the same.

FOOTERS_KEPT = 16384  # data files whose footer facts are kept


@dataclass(frozen=True)
class FileFooter:
    """What the read path needs of one Parquet file's footer."""

    columns: frozenset[str]  # the top-level column names the file holds
    misread: bool  # whether DuckDB 2.0.0 filters one of its column chunks wrongly (see above)
    schema: pa.Schema  # the file's columns in order, with their types
    # Top-level columns whose statistics prove every row group holds no NULL.
    null_free: frozenset[str] = frozenset()
    # Signed integer columns whose statistics prove no value is its type's smallest, so that
    # the value negated (a delete mark weighed by its sign) fits the type.
    negatable: frozenset[str] = frozenset()


_FOOTERS: OrderedDict[tuple[str, int, int], FileFooter] = OrderedDict()
_FOOTERS_LOCK = threading.Lock()


def file_footer(path: str) -> FileFooter:
    """The footer facts of the local Parquet file ``path``, read once per process for each
    (path, size, modification time). A file that is gone was deleted by vacuum after its
    grace period: the snapshot naming it can no longer be read."""
    try:
        status = os.stat(path)
    except FileNotFoundError as e:
        raise SnapshotNotFoundError(
            f"data file {path!r} of this snapshot is gone: vacuum deleted it after its grace "
            "period; read a newer version (table.snapshot() or views of the table)"
        ) from e
    key = (path, status.st_size, status.st_mtime_ns)
    with _FOOTERS_LOCK:
        footer = _FOOTERS.get(key)
        if footer is not None:
            _FOOTERS.move_to_end(key)
            return footer
    metadata = pq.read_metadata(path)
    # Without the key-value metadata: two files of one table differ there (their writers'
    # notes) and still read alike.
    schema = metadata.schema.to_arrow_schema().remove_metadata()
    null_free, negatable = _proven_by_statistics(metadata, schema)
    footer = FileFooter(
        frozenset(schema.names), _has_misread_chunk(metadata), schema, null_free, negatable
    )
    with _FOOTERS_LOCK:
        _FOOTERS[key] = footer
        while len(_FOOTERS) > FOOTERS_KEPT:
            _FOOTERS.popitem(last=False)
    return footer


def _proven_by_statistics(
    metadata: pq.FileMetaData, schema: pa.Schema
) -> tuple[frozenset[str], frozenset[str]]:
    """The top-level columns whose chunk statistics (in every row group) prove they hold no
    NULL, and the signed integer ones among all columns whose statistics prove no value is the
    type's smallest. A column without statistics in some row group proves nothing."""
    leaves = _top_level_leaves(schema)
    null_free = set(leaves)
    negatable = {n for n in leaves if pa.types.is_signed_integer(schema.field(n).type)}
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for name, index in leaves.items():
            stats = row_group.column(index).statistics
            if stats is None or not stats.has_null_count or stats.null_count:
                null_free.discard(name)
            if name in negatable and not _above_smallest(stats, schema.field(name).type):
                negatable.discard(name)
    return frozenset(null_free), frozenset(negatable)


def _top_level_leaves(schema: pa.Schema) -> dict[str, int]:
    """The Parquet leaf column index of each top-level column that is a leaf itself (not a
    struct, list or map)."""
    found: dict[str, int] = {}
    index = 0
    for field in schema:
        if _leaf_count(field.type) == 1 and not pa.types.is_nested(field.type):
            found[field.name] = index
        index += _leaf_count(field.type)
    return found


def _leaf_count(data_type: pa.DataType) -> int:
    if pa.types.is_struct(data_type):
        return sum(_leaf_count(data_type.field(i).type) for i in range(data_type.num_fields))
    if pa.types.is_map(data_type):
        return _leaf_count(data_type.key_type) + _leaf_count(data_type.item_type)
    if pa.types.is_list(data_type) or pa.types.is_large_list(data_type):
        return _leaf_count(data_type.value_type)
    if pa.types.is_fixed_size_list(data_type):
        return _leaf_count(data_type.value_type)
    return 1


def _above_smallest(stats: pq.Statistics | None, data_type: pa.DataType) -> bool:
    """Whether a chunk's statistics prove that its smallest value is above ``data_type``'s."""
    if stats is None or not stats.has_min_max:
        # No value at all (every row NULL) cannot overflow; otherwise nothing is proven.
        return stats is not None and stats.has_null_count and stats.num_values == 0
    smallest = -(2 ** (data_type.bit_width - 1))
    return isinstance(stats.min, int) and stats.min > smallest


def misread_by_duckdb(paths: Sequence[str]) -> bool:
    """Whether any of the local Parquet files ``paths`` holds a column chunk DuckDB 2.0.0
    filters wrongly (see above; each footer read once per process: :func:`file_footer`)."""
    return any(file_footer(path).misread for path in paths)


def _has_misread_chunk(metadata: pq.FileMetaData) -> bool:
    if metadata.created_by.startswith("DuckDB"):
        return False  # its own writer's plain strings (merges' COPY) are read right
    for group in range(metadata.num_row_groups):
        row_group = metadata.row_group(group)
        for column in range(row_group.num_columns):
            chunk = row_group.column(column)
            if chunk.physical_type != "BYTE_ARRAY" or chunk.has_offset_index:
                continue
            if any("DICTIONARY" in encoding for encoding in chunk.encodings):
                continue
            stats = chunk.statistics
            if stats is None or not stats.has_min_max or not stats.has_null_count:
                continue
            if stats.null_count > 0 and stats.min == stats.max:
                return True
    return False
