"""Every error ledger-tables raises: one root, one module.

Subclasses also inherit the builtin that fits (``KeyError``, ``ValueError``, ``OSError``) so that
callers who catch builtins keep working. Every message says what was wrong and what to do.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa


class LedgerError(Exception):
    """Root of every error raised by ledger-tables."""


class _LookupError(LedgerError, KeyError):
    """A ledger error that is also a ``KeyError``, printed as its message (``KeyError`` would
    print the repr of its argument)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


# --- bad input: raised before anything is written -------------------------------------------


class InvalidArgumentError(LedgerError, ValueError):
    """An argument has a value the operation cannot accept."""


class SchemaError(LedgerError, ValueError):
    """A schema definition, or data that does not fit the table's schema."""


class UnknownColumnError(SchemaError):
    """Data names a column the table does not have (and schema evolution was not asked for)."""


class TypeMismatchError(SchemaError):
    """A value does not fit the type of its column."""


class MissingKeyError(SchemaError):
    """A primary-key column is missing from the data, or holds NULL."""


class DuplicateKeyError(LedgerError, ValueError):
    """One keyed operation names the same key twice."""


class UnmatchedDeleteMarkError(LedgerError, ValueError):
    """A delete mark given to ``append_entries`` cancels no live entry: none of its key carries
    exactly its values, or more marks than live entries carry them."""


class KeyNotFoundError(_LookupError):
    """An update names keys that have no visible row."""


class StaleVersionError(InvalidArgumentError):
    """An upsert or update of a replacing table gives a row a version below the version of its
    key's latest entry, so the new row would not be the one the table shows."""


class InvalidPredicateError(LedgerError, ValueError):
    """A SQL predicate that cannot be parsed or bound to the table's columns."""


class UnknownPredicateColumnError(UnknownColumnError, InvalidPredicateError):
    """A predicate names a column the table does not have (in any case)."""


class UnsafeSqlError(InvalidArgumentError):
    """SQL handed to an operation is not one plain SELECT over the relations the operation
    provides: a statement (COPY, ATTACH, SET, ...), several statements, a table function or file
    read, a table the operation does not provide, or a function that reveals settings."""


class UnsafePredicateError(UnsafeSqlError, InvalidPredicateError):
    """A predicate (``where=``, ``delete_where``) reads files, tables or settings."""


class InsertTransformError(InvalidArgumentError):
    """A table's insert transform is not one row-by-row SELECT over ``rows``, or it failed on
    the rows of a write (nothing was written)."""


class SourceNotFoundError(LedgerError, FileNotFoundError):
    """A path given as data names no existing file or folder, or a glob matches no file (an
    existing folder with no data file in it is empty data, not this error)."""


class MalformedSourceError(SchemaError):
    """A file (or relation) given as data cannot be parsed: a malformed CSV line, invalid JSON,
    a file that is not Parquet."""


# --- reads ----------------------------------------------------------------------------------------


class TotalOverflowError(LedgerError, OverflowError):
    """A sum of a DECIMAL column exceeds the 38 digits of the widest exact type."""


# --- catalog ----------------------------------------------------------------------------------


class TableNotFoundError(_LookupError):
    """No table of that name exists in the warehouse (or it was dropped)."""


class TableExistsError(LedgerError, ValueError):
    """``create_table`` was called for a name that is already taken."""


class SnapshotNotFoundError(_LookupError):
    """The requested version or timestamp is not in the table's log (never was, or vacuumed)."""


# --- commits ----------------------------------------------------------------------------------


class ConflictError(LedgerError):
    """Another commit touched what this transaction read or rewrote; nothing was committed.

    Retrying the operation on the new state is safe.
    """


class TableDroppedError(ConflictError):
    """The table was dropped by another writer after this handle read it."""


class TransactionTimeoutError(ConflictError):
    """The transaction stayed open longer than the table's ``transaction_timeout``; nothing was
    committed (vacuum may already treat its files as orphans). Retry it."""


class TransactionClosedError(LedgerError):
    """The transaction was already committed or aborted."""


class FlushError(LedgerError):
    """A buffered writer could not commit rows it had accepted. They stay buffered (with their
    app batch) and the next flush tries again; the cause is chained."""


class BatchTakenError(FlushError):
    """A buffered writer's app batch was already committed by another writer with the same
    ``app_id``: an app_id belongs to one writer at a time. The writer commits nothing more; its
    rows stay buffered until ``close()``, whose error hands them back in ``rows`` (an Arrow
    table in the table's types) to be written by a writer with an ``app_id`` of its own."""

    def __init__(self, message: str, rows: pa.Table | None = None) -> None:
        super().__init__(message)
        self.rows = rows


class WriterClosedError(LedgerError):
    """A buffered writer was closed; open a new one with ``table.writer()``."""


# --- storage and log --------------------------------------------------------------------------


class StorageError(LedgerError, OSError):
    """The store failed or does not honour a guarantee the log relies on."""


class CorruptLogError(LedgerError):
    """A log file could not be parsed. The message names the file; no state is guessed."""


# --- set-up -----------------------------------------------------------------------------------


class MissingDependencyError(LedgerError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""
