"""DuckDB's errors as the ledger's: which of them mean a query is wrong, and which a file is."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import duckdb

from ledger.errors import StorageError

# Errors of a query that is wrong for the data (bad predicate, unknown column, bad cast), as
# opposed to errors reading the data.
QUERY_ERRORS = (
    duckdb.BinderException,
    duckdb.ParserException,
    duckdb.CatalogException,
    duckdb.ConversionException,
)

# Errors of a value that does not fit its type (a cast or a sum that overflows).
VALUE_ERRORS = (duckdb.ConversionException, duckdb.OutOfRangeException)


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


def engine_reason(error: BaseException) -> str:
    """DuckDB's reason for refusing a query, without the query text it quotes after ``LINE``
    (SQL the user never wrote)."""
    reason = str(error).split("\nLINE ", 1)[0]
    return reason.strip()
