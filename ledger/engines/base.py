"""The engine contract: what the ledger asks of an execution engine (DuckDB, Spark).

An engine reads and writes a table's data files and runs queries over their entries; the log,
snapshots and commits stay in ``ledger`` and are the same whatever engine ran. An engine
works in terms of its own *session* (a DuckDB connection, a SparkSession) and *relation* (a
DuckDB relation, a DataFrame): both are opaque to the caller, who gets a relation from one
method and hands it to another or to the engine's own API. Implementations are picked by name
from :data:`ledger.engines.ENGINES`.
"""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Protocol, TypeVar

if TYPE_CHECKING:
    import pyarrow as pa
    from sqlglot import exp

    from ledger.changes import ChangeSet
    from ledger.log.entries import FileMarker
    from ledger.storage import Store
    from ledger.writer import DataWriter

SessionT = TypeVar("SessionT", contravariant=True)
RelationT = TypeVar("RelationT")


class Engine(Protocol[SessionT, RelationT]):
    """An execution engine: five operations over a table's files, and the errors that mean a
    query does not fit the data.

    Every method reads only the files it is given, never the log: which files make a version is
    decided by the caller (``ledger.snapshot``, ``ledger.changes``), so an engine cannot make an
    uncommitted entry visible or show a committed one twice.
    """

    name: str
    """The engine's name in :data:`ledger.engines.ENGINES` (``"duckdb"``, ``"spark"``)."""

    query_errors: tuple[type[Exception], ...]
    """The engine's exceptions for a query that is wrong for the data (it does not parse or
    bind, or a cast fails), as opposed to one that fails reading a file (those are raised as
    :class:`ledger.errors.StorageError`). Callers catch them to raise a ledger error naming
    what the user got wrong."""

    def scan(
        self,
        session: SessionT,
        store: Store,
        table_prefix: str,
        files: Sequence[FileMarker],
        schema: pa.Schema,
    ) -> RelationT:
        """The raw entries of ``files`` (relative to ``table_prefix``) as a relation with
        exactly ``schema``: a column a file lacks (written before the schema grew) reads as
        NULL, a narrower type is cast up; no files gives an empty relation. Nothing is read
        until the relation is computed; a file that cannot be read then raises StorageError."""
        ...

    def run(self, session: SessionT, tree: exp.Expression) -> RelationT:
        """``tree`` (a sqlglot query naming relations the session knows) rendered in the
        engine's dialect, as a relation; the same tree means the same rows on every engine."""
        ...

    def write_entries(self, entries: RelationT, writer: DataWriter) -> list[FileMarker]:
        """Write ``entries`` (numbered entry rows of the table's file schema) as sorted data
        files of ``writer``'s table, one or more per partition; return their markers. Nothing
        is committed: the caller commits the markers or deletes the files."""
        ...

    def rewrite_files(
        self,
        store: Store,
        table_prefix: str,
        files: Sequence[FileMarker],
        schema: pa.Schema,
        sql: str,
        order_by: Sequence[str],
        batch_rows: int,
    ) -> AbstractContextManager[pa.RecordBatchReader]:
        """The result of a merge policy's or rewrite's query ``sql`` (DuckDB SQL over the
        relation :data:`ledger.sql.names.ENTRIES`) over the entries of ``files``, sorted by
        ``order_by`` (NULLs last, as appends sort), streamed in batches of about
        ``batch_rows``. A query that does not fit raises one of :attr:`query_errors`; an
        unreadable file StorageError. The caller writes the result and commits it."""
        ...

    def change_entries(
        self,
        session: SessionT,
        store: Store,
        table_prefix: str,
        change_set: ChangeSet,
        schema: pa.Schema,
    ) -> RelationT:
        """The entries of ``change_set`` (see ``ledger.changes``) with ``_commit_version`` and
        ``_commit_timestamp``: the entries of files a commit wrote, stamped with that commit;
        for a commit that replaced files (a merge, a rewrite), the entries of its removed files
        negated and of its added files, netted per value tuple, each left as many times as its
        net sign says (a merge that changes no answer adds no change entry)."""
        ...
