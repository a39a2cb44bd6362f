"""ledger-tables: log-structured ledger tables on object storage.

>>> import ledger
>>> wh = ledger.connect("./warehouse")                                         # doctest: +SKIP
>>> t = wh.create_table("metrics", {"device_id": "BIGINT", "temperature": "DOUBLE"},
...                     primary_key=["device_id"])                             # doctest: +SKIP
>>> t.upsert([{"device_id": 1, "temperature": 21.5}])                          # doctest: +SKIP
"""

from __future__ import annotations

from ledger.buffered_writer import BufferedWriter
from ledger.errors import (
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
    UnmatchedDeleteMarkError,
    UnsafePredicateError,
    UnsafeSqlError,
    WriterClosedError,
)
from ledger.snapshot import Snapshot
from ledger.table import CommitRecord, Table
from ledger.transaction import CommitInfo, Transaction
from ledger.warehouse import Warehouse, connect

__all__ = [
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
    "UnmatchedDeleteMarkError",
    "UnsafePredicateError",
    "UnsafeSqlError",
    "Warehouse",
    "WriterClosedError",
    "connect",
]
