"""The embedded DuckDB engine: connections and raw-ledger relations over data files.

Connections never install or load extensions at run time (there may be no network). Local files
are scanned by DuckDB's own Parquet reader; files on S3 are scanned through a pyarrow dataset.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads

from ledger.errors import StorageError
from ledger.log.entries import FileMarker
from ledger.sql import ident
from ledger.storage import Store

DuckDBConnection = duckdb.DuckDBPyConnection
Relation = duckdb.DuckDBPyRelation

# Errors of a query that is wrong for the data (bad predicate, unknown column, bad cast), as
# opposed to errors reading the data.
QUERY_ERRORS = (
    duckdb.BinderException,
    duckdb.ParserException,
    duckdb.CatalogException,
    duckdb.ConversionException,
)

_CONFIG = {"autoinstall_known_extensions": False, "autoload_known_extensions": False}


def connect() -> duckdb.DuckDBPyConnection:
    """A new in-memory DuckDB connection that never downloads extensions."""
    con = duckdb.connect(config=dict(_CONFIG))
    # Compute in UTC whatever the machine's zone: TIMESTAMPTZ values then come back as stored.
    con.execute("SET TimeZone = 'UTC'")
    return con


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
    if all(p is not None for p in local):
        relation = con.read_parquet([p for p in local if p is not None], union_by_name=True)
        present = set(relation.columns)
        projection = ", ".join(
            (
                f"CAST({ident(f.name)} AS {_duck_type(f.type)}) AS {ident(f.name)}"
                if f.name in present
                else f"CAST(NULL AS {_duck_type(f.type)}) AS {ident(f.name)}"
            )
            for f in schema
        )
        return relation.project(projection)
    dataset = pads.dataset(
        [store.fs_path(k) for k in keys],
        schema=schema,
        format="parquet",
        filesystem=store.filesystem,
    )
    return con.from_arrow(dataset)


def _duck_type(data_type: pa.DataType) -> str:
    from ledger.schema import arrow_to_sql

    return arrow_to_sql(data_type)


@contextmanager
def storage_errors(what: str) -> Iterator[None]:
    """Report a data file that could not be read as :class:`StorageError` (an ``OSError``).

    DuckDB wraps failures of its own reader and of Arrow sources (files on S3 are read through
    pyarrow) in its own exception types; callers should not need to know the engine.
    """
    try:
        yield
    except duckdb.Error as e:
        message = str(e)
        if isinstance(e, duckdb.IOException) or "IOError" in message:
            raise StorageError(f"{what}: a data file could not be read: {message}") from e
        raise
