"""Data files as a DuckDB relation of raw entries.

Local files are scanned by DuckDB's own Parquet reader; files on S3 through a pyarrow dataset
(DuckDB never loads its httpfs extension: there may be no network to download it).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import duckdb
import pyarrow as pa
import pyarrow.dataset as pads

from ledger.log.entries import FileMarker
from ledger.schema import arrow_to_sql
from ledger.sql import ident
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
    if all(p is not None for p in local):
        # No hive partitioning: partition values live in the log, never as file columns.
        relation = con.read_parquet(
            [p for p in local if p is not None], union_by_name=True, hive_partitioning=False
        )
        return relation.project(_projection(schema, frozenset(relation.columns)))
    dataset = pads.dataset(
        [store.fs_path(k) for k in keys],
        schema=schema,
        format="parquet",
        filesystem=store.filesystem,
    )
    return con.from_arrow(dataset)


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
