"""DuckDB's errors as the ledger's: which of them mean a query is wrong, and which a file is."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext

import duckdb

from ledger.errors import InvalidPredicateError, StorageError

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

# Errors of SQL a user wrote (a predicate, a merge or rewrite query) that binds but fails on
# the rows it runs over: a cast or an arithmetic overflow (VALUE_ERRORS), a division by zero, a
# bad regular expression, ``error('...')`` (DuckDB's InvalidInputException).
FAILED_ON_ROWS = duckdb.InvalidInputException
RUNNING_ERRORS = (*VALUE_ERRORS, FAILED_ON_ROWS)

# Every error of user SQL, whether it does not bind or fails while running.
USER_SQL_ERRORS = (*QUERY_ERRORS, *RUNNING_ERRORS)

_SOURCE_COLUMN = re.compile(r"when casting from source column (\S+)")


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


@contextmanager
def user_sql_failures(failed: Callable[[str, BaseException], Exception]) -> Iterator[None]:
    """Report an error of SQL text a user wrote (see USER_SQL_ERRORS) as ``failed(reason,
    error)``, a typed error naming what the user wrote, with DuckDB's reason inside.

    The one boundary where user SQL runs: wrap the call that binds or computes it (lazy
    relations handed back to the user are computed later, in DuckDB's hands).

    >>> from ledger.errors import InvalidPredicateError
    >>> with user_sql_failures(lambda reason, _: InvalidPredicateError(reason)):
    ...     duckdb.sql("SELECT error('boom')").fetchall()
    Traceback (most recent call last):
    ledger.errors.InvalidPredicateError: Invalid Input Error: boom
    """
    try:
        yield
    except USER_SQL_ERRORS as e:
        raise failed(engine_reason(e), e) from e


def failed_column(error: BaseException) -> str | None:
    """The column DuckDB names in a failed cast (``... when casting from source column s``)."""
    found = _SOURCE_COLUMN.search(str(error))
    return found.group(1) if found else None


def predicate_failures(
    predicate: str | None, table: str, *, writes: bool = False
) -> AbstractContextManager[None]:
    """:func:`user_sql_failures` for a ``where=`` predicate (the text the user wrote) that
    fails on the rows of ``table``: :class:`InvalidPredicateError`. Nothing to wrap without
    one."""
    if predicate is None:
        return nullcontext()
    done = "; nothing was written" if writes else ""

    def failed(reason: str, _: BaseException) -> Exception:
        return InvalidPredicateError(
            f"predicate {predicate!r} failed on the rows of table {table!r}: {reason}{done}"
        )

    return user_sql_failures(failed)
