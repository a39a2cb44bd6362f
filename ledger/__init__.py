"""ledger-tables: log-structured ledger tables on object storage.

>>> import ledger
>>> wh = ledger.connect("./warehouse")                                         # doctest: +SKIP
>>> t = wh.create_table("metrics", {"device_id": "BIGINT", "temperature": "DOUBLE"},
...                     primary_key=["device_id"])                             # doctest: +SKIP
>>> t.upsert([{"device_id": 1, "temperature": 21.5}])                          # doctest: +SKIP

The public names are loaded on first use (PEP 562): importing ``ledger`` (or any of its
modules, or ``merge_policies``, which imports ``ledger.errors``) runs only this file, so no
module ever sees a half-loaded package and no import order matters.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ledger.buffered_writer import BufferedWriter
    from ledger.errors import (
        BatchTakenError,
        ConflictError,
        CorruptLogError,
        DuplicateKeyError,
        FlushError,
        InvalidArgumentError,
        InvalidPredicateError,
        KeyNotFoundError,
        LedgerError,
        MalformedSourceError,
        MissingDependencyError,
        MissingKeyError,
        SchemaError,
        SnapshotNotFoundError,
        SourceNotFoundError,
        StorageError,
        TableDroppedError,
        TableExistsError,
        TableNotFoundError,
        TransactionClosedError,
        TransactionTimeoutError,
        TypeMismatchError,
        UnknownColumnError,
        UnknownPredicateColumnError,
        UnmatchedDeleteMarkError,
        UnsafePredicateError,
        UnsafeSqlError,
        WriterClosedError,
    )
    from ledger.snapshot import Snapshot
    from ledger.table import (
        CommitRecord,
        Table,
    )
    from ledger.transaction import (
        CommitInfo,
        Transaction,
    )
    from ledger.warehouse import (
        Warehouse,
        connect,
    )

# Public name -> the module that defines it.
_PUBLIC: dict[str, str] = {
    "BufferedWriter": "ledger.buffered_writer",
    "CommitInfo": "ledger.transaction",
    "CommitRecord": "ledger.table",
    "BatchTakenError": "ledger.errors",
    "ConflictError": "ledger.errors",
    "CorruptLogError": "ledger.errors",
    "DuplicateKeyError": "ledger.errors",
    "FlushError": "ledger.errors",
    "InvalidArgumentError": "ledger.errors",
    "InvalidPredicateError": "ledger.errors",
    "KeyNotFoundError": "ledger.errors",
    "LedgerError": "ledger.errors",
    "MalformedSourceError": "ledger.errors",
    "MissingDependencyError": "ledger.errors",
    "MissingKeyError": "ledger.errors",
    "SchemaError": "ledger.errors",
    "Snapshot": "ledger.snapshot",
    "SnapshotNotFoundError": "ledger.errors",
    "SourceNotFoundError": "ledger.errors",
    "StorageError": "ledger.errors",
    "Table": "ledger.table",
    "TableDroppedError": "ledger.errors",
    "TableExistsError": "ledger.errors",
    "TableNotFoundError": "ledger.errors",
    "Transaction": "ledger.transaction",
    "TransactionClosedError": "ledger.errors",
    "TransactionTimeoutError": "ledger.errors",
    "TypeMismatchError": "ledger.errors",
    "UnknownColumnError": "ledger.errors",
    "UnknownPredicateColumnError": "ledger.errors",
    "UnmatchedDeleteMarkError": "ledger.errors",
    "UnsafePredicateError": "ledger.errors",
    "UnsafeSqlError": "ledger.errors",
    "Warehouse": "ledger.warehouse",
    "WriterClosedError": "ledger.errors",
    "connect": "ledger.warehouse",
}

__all__ = [
    "BatchTakenError",
    "BufferedWriter",
    "CommitInfo",
    "CommitRecord",
    "ConflictError",
    "CorruptLogError",
    "DuplicateKeyError",
    "FlushError",
    "InvalidArgumentError",
    "InvalidPredicateError",
    "KeyNotFoundError",
    "LedgerError",
    "MalformedSourceError",
    "MissingDependencyError",
    "MissingKeyError",
    "SchemaError",
    "Snapshot",
    "SnapshotNotFoundError",
    "SourceNotFoundError",
    "StorageError",
    "Table",
    "TableDroppedError",
    "TableExistsError",
    "TableNotFoundError",
    "Transaction",
    "TransactionClosedError",
    "TransactionTimeoutError",
    "TypeMismatchError",
    "UnknownColumnError",
    "UnknownPredicateColumnError",
    "UnmatchedDeleteMarkError",
    "UnsafePredicateError",
    "UnsafeSqlError",
    "Warehouse",
    "WriterClosedError",
    "connect",
]


def __getattr__(name: str) -> Any:
    """Load a public name from its module on first use and keep it here."""
    try:
        module = _PUBLIC[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_PUBLIC})
