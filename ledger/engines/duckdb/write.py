"""Rows to write, from DuckDB: a relation streamed as Arrow batches, and entries written as
files by the ledger's writer (DuckDB itself never writes a data file)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa

from ledger.errors import MalformedSourceError
from ledger.log.entries import FileMarker

if TYPE_CHECKING:
    from ledger.writer import DataWriter


def relation_batches(relation: Any, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """A DuckDB relation's rows as Arrow batches, streamed; a relation that fails to compute
    raises MalformedSourceError."""
    try:
        yield from relation.to_arrow_reader(batch_rows)
    except (duckdb.Error, pa.ArrowException, OSError) as e:
        # An error met while the relation streams (error() in a later row, a file it reads
        # going away) reaches us through Arrow's reader as an Arrow error or an OSError.
        raise MalformedSourceError(f"the DuckDB relation could not be read: {e}") from e


def write_entries(entries: duckdb.DuckDBPyRelation, writer: DataWriter) -> list[FileMarker]:
    """Write ``entries`` (numbered entry rows of the file schema) as sorted files, one per
    partition and size limit, with ``writer``; return their markers (nothing is committed)."""
    return writer.write(entries.to_arrow_table())
